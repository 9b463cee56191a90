#include "mlx_fused_attn/plan/quantized_attention_planner.h"

#include <algorithm>
#include <sstream>

#include "mlx/utils.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_kernel_name.h"
#include "mlx_fused_attn/plan/kernel_switches.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

std::string op_name(const DeviceCaps& caps) {
  return "[quantized_scaled_dot_product_attention] " + caps.name + ": ";
}

/// The plan's family-independent part: shapes, scale and mask features.
QuantizedAttentionPlan shape_plan(const QuantizedAttentionCall& call) {
  const array& q = call.inputs[kQuantQ];
  const array& k_words = call.inputs[kQuantKWords];
  QuantizedAttentionPlan plan;
  plan.spec = call.spec;
  fa::AttnParams& p = plan.params;
  p.B = q.shape(0);
  p.H_q = q.shape(1);
  p.H_kv = k_words.shape(1);
  p.gqa_factor = p.H_q / p.H_kv;
  p.L_q = q.shape(2);
  p.L_k = k_words.shape(2);
  p.D = q.shape(3);
  p.D_v = quantized_output_shape(call.inputs)[3];
  p.causal_offset = p.L_k - p.L_q;
  p.scale_log2 = call.spec.attention.scale * kLog2e;

  fa::AttnFeatures& f = plan.features;
  const MaskKind mask = call.spec.attention.mask;
  f.has_mask = quantized_mask_index(call.spec) >= 0;
  f.bool_mask = mask == MaskKind::Bool;
  f.causal = mask == MaskKind::Causal;
  f.has_sinks = call.spec.attention.has_sinks;
  return plan;
}

bool has_empty_input(
    const QuantizedAttentionCall& call,
    QuantizedAttentionPlan& plan) {
  for (const auto& a : call.inputs) {
    if (a.size() == 0) {
      plan.reason = "an input is empty; empty calls run as plain MLX ops";
      return true;
    }
  }
  return false;
}

/// Decode with GQA: the gqa_factor query heads of a key/value head become
/// the rows of one block of H_kv heads, so its K and V are dequantized once
/// for all of them. At L_q = 1 the causal mask hides no key.
void pack_gqa_rows(QuantizedAttentionPlan& plan) {
  fa::AttnParams& p = plan.params;
  if (p.L_q != 1 || p.gqa_factor == 1) {
    return;
  }
  p.L_q = p.gqa_factor;
  p.H_q = p.H_kv;
  p.gqa_factor = 1;
  p.causal_offset = p.L_k - 1;
  plan.features.causal = false;
  plan.packed_gqa = true;
}

/// The CPU kernel takes every head dim and code width the op admits; its
/// one limit is the element type.
Support cpu_kernel_covers(
    const QuantizedAttentionCall& call,
    QuantizedAttentionPlan& plan) {
  const Dtype dtype = call.inputs[kQuantQ].dtype();
  const auto kernel = kernel_dtype(dtype);
  if (!kernel) {
    std::ostringstream msg;
    msg << "the fused CPU kernel takes float16, bfloat16 or float32, not "
        << dtype << "; this call runs as plain MLX ops";
    return Support::no(msg.str());
  }
  plan.dtype = *kernel;
  return Support::yes();
}

unsigned blocks_of(int64_t items, int per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
}

/// The GPU kernels' own limits (dtype, head dims, bits and groups), each
/// "no" naming the op and the backend; on yes, `plan.dtype` is the
/// kernels'.
Support gpu_kernel_covers(
    const DeviceCaps& caps,
    const QuantizedAttentionCall& call,
    QuantizedAttentionPlan& plan) {
  const Dtype dtype = call.inputs[kQuantQ].dtype();
  const auto kernel = kernel_dtype(dtype);
  if (!kernel) {
    std::ostringstream msg;
    msg << op_name(caps) << "no kernel for dtype " << dtype
        << " (float16, bfloat16 and float32 have one)";
    return Support::no(msg.str());
  }
  plan.dtype = *kernel;
  const fa::AttnParams& p = plan.params;
  const KvQuantization& kv = plan.spec.kv;
  if (!fa::quantized_attention_covers(p.D, p.D_v, kv.bits, kv.group_size)) {
    std::ostringstream msg;
    msg << op_name(caps) << "no kernel for head dims " << p.D << " (q, k) and "
        << p.D_v << " (v) with " << kv.bits << "-bit groups of "
        << kv.group_size
        << "; kernels take equal head dims of 64, 96, 128, 192 or 256, 4 or 8 "
           "bits, and groups of 32, 64 or 128 that divide the head dim";
    return Support::no(msg.str());
  }
  return Support::yes();
}

/// The GPU family's tiles, key splits and grid (quantized_attention.metal,
/// quantized_attention_kernel.cuh): the float kernel's plan
/// (attention_planner.cpp's plan_general_launch) with this family's tiles.
/// Decode with GQA packs the heads sharing K and V into one block's rows,
/// as the float plan does, unless sinks (one a head) would differ by row.
Support plan_gpu(
    const DeviceCaps& caps,
    const QuantizedAttentionCall& call,
    QuantizedAttentionPlan& plan) {
  if (Support covered = gpu_kernel_covers(caps, call, plan); !covered.ok) {
    return covered;
  }
  if (!plan.features.has_sinks) {
    pack_gqa_rows(plan);
  }
  const fa::AttnParams& p = plan.params;
  const fa::Backend backend = *caps.gpu;
  const fa::AttnTiles tiles =
      fa::choose_quantized_attention_tiles(p.D, plan.dtype, backend);
  plan.tiles = tiles;
  plan.features.align_q = p.L_q % tiles.bq == 0;
  plan.features.align_k = p.L_k % tiles.bk == 0;
  const int64_t groups = int64_t(blocks_of(p.L_q, tiles.bq)) * p.H_q * p.B;
  // Dequantized K and V cost the partials what bf16 ones do: the share of
  // the float plan, counted in the element type's bytes.
  plan.key_splits = split_keys_enabled()
      ? key_split_count(
            groups, int64_t(tiles.min_blocks) * caps.cores,
            static_cast<int>(blocks_of(p.L_k, tiles.bk)),
            splits_worth_their_partials(
                p.L_k, std::min(tiles.bq, p.L_q), p.D, p.D_v,
                fa::dtype_size(plan.dtype), 2 * groups >= caps.cores ? 16 : 8))
      : 1;
  plan.features.split_keys = plan.key_splits > 1;
  plan.split_merge = backend == fa::Backend::Cuda &&
      plan.features.split_keys && split_merge_enabled();
  plan.grid = {
      blocks_of(p.L_q, tiles.bq) * plan.key_splits,
      static_cast<unsigned>(p.H_q),
      static_cast<unsigned>(p.B),
      tiles.warps,
      fa::attention_smem_bytes(tiles, p.D, p.D_v, plan.dtype, backend)};
  const int most = caps.max_grid_yz;
  if (most > 0 && (p.B > most || p.H_q > most)) {
    std::ostringstream msg;
    msg << op_name(caps) << "batch " << p.B << " or query heads " << p.H_q
        << " over the grid limit of " << most;
    return Support::no(msg.str());
  }
  if (caps.max_smem_bytes > 0 && plan.grid.smem_bytes > caps.max_smem_bytes) {
    std::ostringstream msg;
    msg << op_name(caps) << "the kernel for head dim " << p.D << " and "
        << fa::dtype_name(plan.dtype) << " needs " << plan.grid.smem_bytes
        << " bytes of shared memory a block; this GPU allows "
        << caps.max_smem_bytes;
    return Support::no(msg.str());
  }
  return Support::yes();
}

Support family_built(const DeviceCaps& caps) {
  const std::string* reason =
      caps.unavailable_reason(KernelFamily::QuantizedAttention);
  return reason == nullptr ? Support::yes() : Support::no(*reason);
}

} // namespace

QuantizedAttentionPlan quantized_attention_plan_for(
    const QuantizedAttentionCall& call,
    const DeviceCaps& caps) {
  QuantizedAttentionPlan plan = shape_plan(call);
  if (has_empty_input(call, plan)) {
    return plan;
  }
  if (caps.cpu) {
    if (admitted(cpu_kernel_covers(call, plan), plan) &&
        admitted(family_built(caps), plan)) {
      pack_gqa_rows(plan);
      plan.family = KernelFamily::QuantizedAttention;
    }
    return plan;
  }
  if (!caps.gpu) {
    plan.reason = caps.refusal;
    return plan;
  }
  if (!caps.refusal.empty()) {
    plan.reason = op_name(caps) + caps.refusal;
    return plan;
  }
  if (admitted(plan_gpu(caps, call, plan), plan) &&
      admitted(family_built(caps), plan)) {
    plan.family = KernelFamily::QuantizedAttention;
  }
  return plan;
}

} // namespace mlx_fused_attn
