// The Python module mlx_fused_attn._ext. Argument checking beyond types lives
// in the C++ op, so Python and C++ callers get the same errors.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "mlx_fused_attn/op/attention.h"
#include "mlx_fused_attn/families/attention/metal/attention_variant.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/kernel_availability.h"
#include "mlx_fused_attn/op/mask_block_lists.h"
#include "mlx_fused_attn/op/neighborhood.h"
#include "mlx_fused_attn/op/plan_inputs_state.h"
#include "mlx_fused_attn/op/quantized_attention.h"
#include "mlx_fused_attn/plan/split_count.h"
#include "mlx_fused_attn/notices.h"

namespace nb = nanobind;
using namespace nb::literals;
namespace mx = mlx::core;

namespace {

// None | Stream | Device, as mlx.core's own functions take it.
using StreamArg = std::variant<std::monostate, mx::Stream, mx::Device>;

// (packed codes, scales, biases), as mx.quantize returns them.
using QuantizedArg = std::tuple<mx::array, mx::array, mx::array>;

mlx_fused_attn::QuantizedKv to_quantized(const QuantizedArg& x) {
  return {std::get<0>(x), std::get<1>(x), std::get<2>(x)};
}

mx::StreamOrDevice to_stream_or_device(const StreamArg& s) {
  if (auto* st = std::get_if<mx::Stream>(&s)) {
    return *st;
  }
  if (auto* d = std::get_if<mx::Device>(&s)) {
    return *d;
  }
  return {};
}

// The plan hint (plan_hint.h) from the private keywords of the op and of
// plan_summary: the tuned table's choice for the call.
mlx_fused_attn::PlanHint to_hint(
    bool short_kernel,
    int max_key_splits,
    const std::optional<std::string>& metal_variant) {
  if (max_key_splits < 0) {
    throw std::invalid_argument(
        "[scaled_dot_product_attention] max_key_splits must be 0 (the "
        "planner's count) or a positive cap; got " +
        std::to_string(max_key_splits));
  }
  mlx_fused_attn::PlanHint hint;
  hint.short_kernel = short_kernel;
  hint.max_key_splits = max_key_splits;
  if (metal_variant) {
    try {
      hint.metal_variant = mlx_fused_attn::parse_metal_variant(*metal_variant);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(
          std::string("[scaled_dot_product_attention] metal_variant, in the "
                      "grammar of ") +
          e.what());
    }
  }
  return hint;
}

/// The plan of a call as Python reads it (routing, the tuner), and the
/// device's cores for the tuned table's key.
void bind_plans(nb::module_& m) {
  m.def(
      "plan_summary",
      [](const mx::array& q,
         const mx::array& k,
         const mx::array& v,
         float scale,
         const mlx_fused_attn::Mask& mask,
         const std::optional<mx::array>& sinks,
         const StreamArg& stream,
         bool short_kernel,
         int max_key_splits,
         const std::optional<std::string>& metal_variant) {
        const auto plan = mlx_fused_attn::plan_summary(
            q, k, v, scale, mask, sinks, to_stream_or_device(stream),
            to_hint(short_kernel, max_key_splits, metal_variant));
        nb::dict tiles;
        for (const auto& [name, value] : plan.tiles) {
          tiles[name.c_str()] = value;
        }
        nb::dict d;
        d["code"] = mlx_fused_attn::plan_code_name(plan.code);
        d["message"] = plan.message;
        d["family"] = plan.family;
        d["key_splits"] = plan.key_splits;
        d["packed_gqa"] = plan.packed_gqa;
        d["tiles"] = tiles;
        d["split_merge"] = plan.split_merge;
        d["combine_form"] = plan.combine_form;
        return d;
      },
      "q"_a, "k"_a, "v"_a, nb::kw_only(), "scale"_a, "mask"_a = nb::none(),
      "sinks"_a = nb::none(), "stream"_a = nb::none(),
      "short_kernel"_a = true, "max_key_splits"_a = 0,
      "metal_variant"_a = nb::none(),
      "The plan of a call as a dict: code, message, family, key_splits, "
      "packed_gqa, tiles, split_merge, combine_form.");

  m.def(
      "cuda_multiprocessors",
      [] {
        if (!mx::is_available(mx::Device::gpu)) {
          return 0;
        }
        const auto caps = mlx_fused_attn::gpu::device_caps(
            mx::default_stream(mx::Device::gpu));
        return caps.gpu == fa::Backend::Cuda ? caps.cores : 0;
      },
      "The CUDA GPU's multiprocessors (0 without a CUDA GPU backend): part "
      "of the key of a tuned table.");
}

/// The attention op and whether a call takes the fused kernel.
void bind_attention(nb::module_& m) {
  m.def(
      "scaled_dot_product_attention",
      [](const mx::array& q,
         const mx::array& k,
         const mx::array& v,
         float scale,
         const mlx_fused_attn::Mask& mask,
         const std::optional<mx::array>& sinks,
         bool force_fused,
         const StreamArg& stream,
         bool short_kernel,
         int max_key_splits,
         const std::optional<std::string>& metal_variant) {
        return mlx_fused_attn::scaled_dot_product_attention(
            q, k, v, scale, mask, sinks, force_fused,
            to_stream_or_device(stream),
            to_hint(short_kernel, max_key_splits, metal_variant));
      },
      "q"_a, "k"_a, "v"_a, nb::kw_only(), "scale"_a, "mask"_a = nb::none(),
      "sinks"_a = nb::none(), "force_fused"_a = false,
      "stream"_a = nb::none(), "short_kernel"_a = true,
      "max_key_splits"_a = 0, "metal_variant"_a = nb::none());

  m.def(
      "scaled_dot_product_attention_with_lse",
      [](const mx::array& q,
         const mx::array& k,
         const mx::array& v,
         float scale,
         const mlx_fused_attn::Mask& mask,
         const std::optional<mx::array>& sinks,
         bool force_fused,
         const StreamArg& stream) {
        return mlx_fused_attn::scaled_dot_product_attention_with_lse(
            q, k, v, scale, mask, sinks, force_fused,
            to_stream_or_device(stream));
      },
      "q"_a, "k"_a, "v"_a, nb::kw_only(), "scale"_a, "mask"_a = nb::none(),
      "sinks"_a = nb::none(), "force_fused"_a = false,
      "stream"_a = nb::none());

  // For ring attention's backward: one block's share of dq, dk, dv from the
  // whole attention's output and LSE.
  m.def(
      "attention_backward",
      [](const mx::array& q,
         const mx::array& k,
         const mx::array& v,
         const mx::array& out,
         const mx::array& lse,
         const mx::array& dout,
         float scale,
         const mlx_fused_attn::Mask& mask,
         const StreamArg& stream) {
        return mlx_fused_attn::attention_backward(
            q, k, v, out, lse, dout, scale, mask, to_stream_or_device(stream));
      },
      "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "dout"_a, nb::kw_only(),
      "scale"_a, "mask"_a = nb::none(), "stream"_a = nb::none());

  // For ring attention's forward: a block's attention merged into the
  // output and LSE held so far (in place on the CPU).
  m.def(
      "attention_merge",
      [](const mx::array& q,
         const mx::array& k,
         const mx::array& v,
         const mx::array& held_out,
         const mx::array& held_lse,
         float scale,
         const mlx_fused_attn::Mask& mask,
         const StreamArg& stream) {
        return mlx_fused_attn::attention_merge(
            q, k, v, held_out, held_lse, scale, mask,
            to_stream_or_device(stream));
      },
      "q"_a, "k"_a, "v"_a, "held_out"_a, "held_lse"_a, nb::kw_only(),
      "scale"_a, "mask"_a = nb::none(), "stream"_a = nb::none());

  m.def(
      "can_use_fused",
      [](const mx::array& q,
         const mx::array& k,
         const mx::array& v,
         float scale,
         const mlx_fused_attn::Mask& mask,
         const std::optional<mx::array>& sinks,
         const StreamArg& stream) {
        return mlx_fused_attn::can_use_fused(
            q, k, v, scale, mask, sinks, to_stream_or_device(stream));
      },
      "q"_a, "k"_a, "v"_a, nb::kw_only(), "scale"_a, "mask"_a = nb::none(),
      "sinks"_a = nb::none(), "stream"_a = nb::none());
}

/// The op over a quantized K/V cache (mlx-lm's signature).
void bind_quantized_attention(nb::module_& m) {
  m.def(
      "quantized_scaled_dot_product_attention",
      [](const mx::array& queries,
         const QuantizedArg& q_keys,
         const QuantizedArg& q_values,
         float scale,
         const mlx_fused_attn::Mask& mask,
         int group_size,
         int bits,
         const std::optional<mx::array>& sinks,
         bool force_fused,
         const StreamArg& stream) {
        return mlx_fused_attn::quantized_scaled_dot_product_attention(
            queries, to_quantized(q_keys), to_quantized(q_values), scale,
            mask, group_size, bits, sinks, force_fused,
            to_stream_or_device(stream));
      },
      "queries"_a, "q_keys"_a, "q_values"_a, "scale"_a, "mask"_a.none(),
      "group_size"_a, "bits"_a, nb::kw_only(), "sinks"_a = nb::none(),
      "force_fused"_a = false, "stream"_a = nb::none());

  m.def(
      "quantized_can_use_fused",
      [](const mx::array& queries,
         const QuantizedArg& q_keys,
         const QuantizedArg& q_values,
         float scale,
         const mlx_fused_attn::Mask& mask,
         int group_size,
         int bits,
         const std::optional<mx::array>& sinks,
         const StreamArg& stream) {
        return mlx_fused_attn::quantized_can_use_fused(
            queries, to_quantized(q_keys), to_quantized(q_values), scale,
            mask, group_size, bits, sinks, to_stream_or_device(stream));
      },
      "queries"_a, "q_keys"_a, "q_values"_a, "scale"_a, "mask"_a.none(),
      "group_size"_a, "bits"_a, nb::kw_only(), "sinks"_a = nb::none(),
      "stream"_a = nb::none());

  // For the tests and benchmarks: which kernel a call's plan runs.
  m.def(
      "_quantized_plan",
      [](const mx::array& queries,
         const QuantizedArg& q_keys,
         const QuantizedArg& q_values,
         float scale,
         const mlx_fused_attn::Mask& mask,
         int group_size,
         int bits,
         const std::optional<mx::array>& sinks,
         const StreamArg& stream) {
        const auto plan = mlx_fused_attn::quantized_attention_plan(
            queries, to_quantized(q_keys), to_quantized(q_values), scale,
            mask, group_size, bits, sinks, to_stream_or_device(stream));
        nb::dict tiles;
        if (const auto* t = std::get_if<fa::AttnTiles>(&plan.tiles)) {
          tiles["bq"] = t->bq;
          tiles["bk"] = t->bk;
          tiles["warps"] = t->warps;
          tiles["min_blocks"] = t->min_blocks;
          tiles["key_slices"] = t->key_slices;
        }
        nb::dict d;
        d["fused"] = plan.fused();
        d["reason"] = plan.reason;
        d["tiles"] = tiles;
        d["chunks"] = fa::quantized_chunks_name(plan.chunks);
        d["key_splits"] = plan.key_splits;
        d["packed_gqa"] = plan.packed_gqa;
        d["combine_form"] = plan.key_splits > 1 && !plan.split_merge
            ? mlx_fused_attn::split_combine_form_name(plan.combine_form)
            : "";
        return d;
      },
      "queries"_a, "q_keys"_a, "q_values"_a, "scale"_a, "mask"_a.none(),
      "group_size"_a, "bits"_a, nb::kw_only(), "sinks"_a = nb::none(),
      "stream"_a = nb::none(),
      "The plan of a quantized call as a dict: fused, reason, tiles (bq, bk, "
      "warps, min_blocks; empty on the CPU), chunks (the CUDA loader's "
      "policy: float, packed_16b, packed_16b_rows), key_splits, packed_gqa.");
}

/// What the tests read of the op's mask preparation.
void bind_mask_lists(nb::module_& m) {
  // For tests: the visit list the GPU kernels read for an array mask, built
  // as the op builds it (through its cache).
  m.def(
      "_mask_visits",
      [](const mx::array& mask,
         mx::Dtype dtype,
         int L_q,
         int L_k,
         int bq,
         int bk,
         const StreamArg& stream) {
        const auto kind = mask.dtype() == mx::bool_
            ? mlx_fused_attn::MaskKind::Bool
            : mlx_fused_attn::MaskKind::Additive;
        return mlx_fused_attn::cached_mask_visits(
            mask, {kind, dtype, L_q, L_k, bq, bk},
            mx::to_stream(to_stream_or_device(stream)));
      },
      "mask"_a, "dtype"_a, "L_q"_a, "L_k"_a, "bq"_a, "bk"_a, nb::kw_only(),
      "stream"_a = nb::none());

  // For tests: the block lists the GPU backward reads for an array mask.
  m.def(
      "_backward_mask_lists",
      [](const mx::array& mask,
         mx::Dtype dtype,
         int L_q,
         int L_k,
         int dkdv_keys,
         int dkdv_queries,
         int dq_queries,
         int dq_keys,
         const StreamArg& stream) {
        const auto kind = mask.dtype() == mx::bool_
            ? mlx_fused_attn::MaskKind::Bool
            : mlx_fused_attn::MaskKind::Additive;
        return mlx_fused_attn::backward_mask_lists(
            mask,
            {kind, dtype, L_q, L_k, dkdv_keys, dkdv_queries, dq_queries,
             dq_keys},
            mx::to_stream(to_stream_or_device(stream)));
      },
      "mask"_a, "dtype"_a, "L_q"_a, "L_k"_a, "dkdv_keys"_a, "dkdv_queries"_a,
      "dq_queries"_a, "dq_keys"_a, nb::kw_only(), "stream"_a = nb::none());
}

/// The neighborhood op and whether a call takes the fused kernel.
void bind_neighborhood(nb::module_& m) {
  m.def(
      "neighborhood_attention",
      [](const mx::array& q,
         const mx::array& k,
         const mx::array& v,
         const std::vector<int>& kernel_size,
         const std::vector<int>& dilation,
         const std::vector<bool>& is_causal,
         std::optional<float> scale,
         const StreamArg& stream) {
        return mlx_fused_attn::neighborhood_attention(
            q, k, v, kernel_size, dilation, is_causal, scale,
            to_stream_or_device(stream));
      },
      "q"_a, "k"_a, "v"_a, "kernel_size"_a, nb::kw_only(), "dilation"_a,
      "is_causal"_a, "scale"_a = nb::none(), "stream"_a = nb::none());

  m.def(
      "neighborhood_can_use_fused",
      [](const mx::array& q,
         const mx::array& k,
         const mx::array& v,
         const std::vector<int>& kernel_size,
         const std::vector<int>& dilation,
         const std::vector<bool>& is_causal,
         std::optional<float> scale,
         const StreamArg& stream) {
        return mlx_fused_attn::neighborhood_can_use_fused(
            q, k, v, kernel_size, dilation, is_causal, scale,
            to_stream_or_device(stream));
      },
      "q"_a, "k"_a, "v"_a, "kernel_size"_a, nb::kw_only(), "dilation"_a,
      "is_causal"_a, "scale"_a = nb::none(), "stream"_a = nb::none());
}

/// The notices, the kernels' outcomes, the families and the build.
void bind_build_info(nb::module_& m) {
  m.def(
      "take_notices",
      [] {
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& n : mlx_fused_attn::take_notices()) {
          out.emplace_back(
              n.kind == mlx_fused_attn::NoticeKind::Fallback ? "fallback"
                                                             : "kernel_failure",
              n.message);
        }
        return out;
      },
      "(kind, message) of the notices not yet reported, each once a "
      "process; kind is \"kernel_failure\" or \"fallback\".");

  m.def(
      "kernel_outcomes",
      [] {
        std::vector<std::tuple<std::string, std::string, std::string, std::string>>
            out;
        for (const auto& o : mlx_fused_attn::kernel_outcomes()) {
          out.emplace_back(o.family, o.device, o.what, o.reason);
        }
        return out;
      },
      "(family, device, what, reason) of every kernel checked so far; "
      "reason is empty where it loaded.");

  m.def(
      "kernel_families",
      [] {
        const auto names = [](const std::vector<mlx_fused_attn::KernelFamily>& fs) {
          std::vector<std::string> out;
          for (const auto f : fs) {
            out.emplace_back(mlx_fused_attn::family_name(f));
          }
          return out;
        };
        return std::make_tuple(
            names(mlx_fused_attn::all_kernel_families()),
            names(mlx_fused_attn::cpu_kernel_families()),
            names(mlx_fused_attn::gpu::backend_info().families));
      },
      "(all, cpu, gpu): every kernel family, those with a CPU kernel, and "
      "those of this build's GPU backend (none without one).");

  m.def(
      "build_info",
      [] {
        const auto info = mlx_fused_attn::gpu::backend_info();
        nb::dict d;
        d["gpu_backend"] = info.name;
        d["aot"] = info.aot;
        d["jit"] = info.jit;
        return d;
      },
      "The GPU backend this build has, whether its kernels were built ahead "
      "of time, and whether they are compiled at run time now.");

  m.def(
      "plan_inputs_state",
      [] { return mlx_fused_attn::plan_inputs_state(); },
      "What the planner reads besides a call's arguments (its switches in "
      "the environment, the kernel builds that failed), as one number: "
      "route() keeps a call's route while it stays the same.");

  m.def(
      "_memory_kind",
      [](mx::array a) {
        {
          nb::gil_scoped_release nogil;
          a.eval();
        }
        return mlx_fused_attn::gpu::memory_kind(a);
      },
      "a"_a,
      "What holds the evaluated array's memory (gpu.h's memory_kind), "
      "without moving it: the host read test asks.");
}

} // namespace

NB_MODULE(_ext, m) {
  m.doc() = "Fused attention kernels for MLX (C++ extension)";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const mlx_fused_attn::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    }
  });

  bind_attention(m);
  bind_quantized_attention(m);
  bind_mask_lists(m);
  bind_neighborhood(m);
  bind_build_info(m);
  bind_plans(m);
}
