// The GPU interface (backend/gpu.h) on Metal: the caps of a stream's
// device, the pipelines of a plan built, and the plan's dispatch through
// MLX's Metal device and command encoder.
//
// Kernels come from their family's library (kernel_library.h). prepare
// builds the pipeline a call will use and checks it against the dispatch,
// so that a kernel that cannot run makes the call fall back before its
// graph exists; MLX's Device caches the libraries and pipelines for eval.
#include <optional>
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/families/attention/metal/attention_variant.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/backend/metal/split_partials.h"
#include "mlx_fused_attn/families/strided_copy/metal/strided_copy_metal.h"
#include "mlx_fused_attn/families/short_attention/metal/short_attention_metal.h"
#include "mlx_fused_attn/kernels/attention_kernel_name.h"
#include "mlx_fused_attn/families/strided_copy/strided_copy_params.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] Metal: ";

/// The GPU cores whose wave split keys fill. Neither Metal nor MLX reports
/// a core count; Apple's GPUs have 8 (M1) to 80 (M3 Ultra), and 32 splits
/// decode finely on all of them while keeping a split's keys long.
constexpr int kMetalGpuCores = 32;

/// The general kernel's pipeline for a plan with its tiles.
MetalPipeline general_pipeline(const AttentionPlan& plan) {
  const auto& tiles = std::get<fa::AttnTiles>(plan.tiles);
  MetalPipeline p;
  p.family = KernelFamily::Attention;
  p.kernel_name = fa::attention_kernel_name(
      plan.dtype, plan.params.D, plan.params.D_v, tiles);
  p.hash_name = fa::attention_pipeline_name(p.kernel_name, plan.features);
#define FA_FUNCTION_CONSTANT(name, index) \
  p.constants.push_back({index, plan.features.name});
  FA_ATTENTION_FEATURES(FA_FUNCTION_CONSTANT)
#undef FA_FUNCTION_CONSTANT
  p.threads = size_t(fa::kSimdWidth) * tiles.warps;
  return p;
}

/// The combine of split keys (split_keys.h), in the general kernel's
/// library.
MetalPipeline general_combine_pipeline(fa::DType dtype) {
  return split_combine_pipeline(
      KernelFamily::Attention, fa::split_combine_kernel_name(dtype));
}

} // namespace

DeviceCaps device_caps(mx::Stream) {
  DeviceCaps caps;
  caps.gpu = fa::Backend::Metal;
  caps.name = "Metal";
  caps.cores = kMetalGpuCores;
  // A variable that names no variant raises on every call.
  caps.metal_variant = metal_variant_from_env();
  return caps;
}

Support prepare(const AttentionPlan& plan, mx::Stream s) {
  auto& d = mx::metal::device(s.device);
  // Strided q, k, v and sinks are copied first (with_contiguous_rows), and
  // whether they are is known only at eval.
  if (Support ready = pipeline_ready(d, strided_copy_pipeline(plan.dtype));
      !ready.ok) {
    return named(kOp, ready);
  }
  if (plan.family == KernelFamily::ShortAttention) {
    return named(kOp, pipeline_ready(d, short_attention_pipeline(plan)));
  }
  // Strides are known at eval: run drops stride32 where offsets need 64
  // bits, so the 64-bit pipeline is built here too, not first inside eval.
  if (plan.features.stride32) {
    AttentionPlan wide = plan;
    wide.features.stride32 = false;
    if (Support ready = pipeline_ready(d, general_pipeline(wide)); !ready.ok) {
      return named(kOp, ready);
    }
  }
  if (plan.key_splits > 1) {
    if (Support ready = pipeline_ready(d, general_combine_pipeline(plan.dtype));
        !ready.ok) {
      return named(kOp, ready);
    }
  }
  return named(kOp, pipeline_ready(d, general_pipeline(plan)));
}

void run(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    mx::Stream s) {
  mx::array& out = outputs[0];
  auto& d = mx::metal::device(s.device);
  auto& enc = mx::metal::get_command_encoder(s);
  const CallInputs call = call_inputs(plan.spec, inputs, plan.visits_input);
  const mx::array q = with_contiguous_rows(call.q, plan.dtype, d, enc);
  const mx::array k = with_contiguous_rows(call.k, plan.dtype, d, enc);
  const mx::array v = with_contiguous_rows(call.v, plan.dtype, d, enc);
  std::optional<mx::array> sinks;
  if (call.sinks != nullptr) {
    sinks = with_contiguous_rows(*call.sinks, plan.dtype, d, enc);
  }
  out.set_data(mx::allocator::malloc(out.nbytes()));
  const fa::AttnParams params =
      launch_params(plan, q, k, v, out, call.mask, call.visits);

  // The backward's LSE, where the primitive asked for it (outputs[1]).
  AttentionPlan run_plan = plan;
  run_plan.features.has_lse = outputs.size() > 1;
  if (plan.features.stride32) {
    // Only the general kernel's plan sets it.
    run_plan.features.stride32 =
        stride32_fits(params, std::get<fa::AttnTiles>(plan.tiles).bk);
  }
  const MetalPipeline pipeline = plan.family == KernelFamily::ShortAttention
      ? short_attention_pipeline(run_plan)
      : general_pipeline(run_plan);
  enc.set_compute_pipeline_state(get_pipeline(d, pipeline));
  enc.set_input_array(q, 0);
  enc.set_input_array(k, 1);
  enc.set_input_array(v, 2);
  enc.set_output_array(out, 3);
  enc.set_bytes(params, 4);
  if (call.mask != nullptr) {
    enc.set_input_array(*call.mask, 5);
  }
  if (sinks) {
    enc.set_input_array(*sinks, 6);
  }
  if (run_plan.features.has_lse) {
    // A plan that saves the LSE has no split keys (plan_general_launch).
    if (plan.key_splits > 1) {
      throw std::logic_error(
          "[FusedAttention] internal error: split keys with the LSE");
    }
    outputs[1].set_data(mx::allocator::malloc(outputs[1].nbytes()));
    enc.set_output_array(outputs[1], 10);
  }
  std::optional<SplitPartials> parts;
  if (plan.key_splits > 1) {
    parts = bind_split_partials(params, plan.key_splits, enc);
  }
  if (call.visits != nullptr) {
    enc.set_input_array(*call.visits, 11);
  }
  const MTL::Size grid(plan.grid.x, plan.grid.y, plan.grid.z);
  const MTL::Size group(fa::kSimdWidth, plan.grid.warps, 1);
  enc.dispatch_threadgroups(grid, group);
  if (parts) {
    combine_splits(
        general_combine_pipeline(plan.dtype), params, plan.key_splits, *parts,
        out, d, enc);
  }
}

} // namespace mlx_fused_attn::gpu
