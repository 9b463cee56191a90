#include "mlx_fused_attn/plan/quantized_attention_planner.h"

#include <sstream>

#include "mlx_fused_attn/families/quantized_attention/quantized_attention_kernel_name.h"
#include "mlx_fused_attn/plan/call_planning.h"
#include "mlx_fused_attn/plan/family_planning.h"
#include "mlx_fused_attn/plan/kernel_switches.h"
#include "mlx_fused_attn/plan/quantized_kernel_choice.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn {

namespace {

std::string op_name(const DeviceCaps& caps) {
  return "[quantized_scaled_dot_product_attention] " + caps.name + ": ";
}

/// The plan's family-independent part: shapes, scale and mask features.
QuantizedAttentionPlan shape_plan(const QuantizedAttentionCall& call) {
  QuantizedAttentionPlan plan;
  plan.spec = call.spec;
  plan_shapes(
      call.spec.attention, call.inputs[kQuantQ].shape(),
      call.inputs[kQuantKWords].shape(),
      quantized_output_shape(call.inputs)[3], plan.params, plan.features);
  return plan;
}

/// The GPU kernels' own limits (dtype, head dims, bits and groups), each
/// "no" naming the op and the backend; on yes, `plan.dtype` is the
/// kernels'.
Support gpu_kernel_covers(
    const PlanTarget& target,
    const QuantizedAttentionCall& call,
    QuantizedAttentionPlan& plan) {
  if (Support takes = gpu_kernels_take(
          target.op, call.inputs[kQuantQ].dtype(), plan.dtype);
      !takes.ok) {
    return takes;
  }
  const fa::AttnParams& p = plan.params;
  const KvQuantization& kv = plan.spec.kv;
  if (!fa::quantized_attention_covers(p.D, p.D_v, kv.bits, kv.group_size)) {
    std::ostringstream msg;
    msg << target.op << "no kernel for head dims " << p.D << " (q, k) and "
        << p.D_v << " (v) with " << kv.bits << "-bit groups of "
        << kv.group_size
        << "; kernels take equal head dims of 32, 64, 96, 128, 192 or 256, "
           "4 or 8 bits, and groups of 32, 64 or 128 that divide the head "
           "dim";
    return Support::no(msg.str());
  }
  return Support::yes();
}

/// The key splits of the quantized kernels, counted in the quantized
/// bytes: a split's partials weigh against the K and V words, scales and
/// biases it reads, and the grid is `per_core` threadgroups a
/// multiprocessor (quantized_kernel_choice.h).
int quantized_key_splits(
    const PlanHint& hint,
    const fa::AttnParams& p,
    const KvQuantization& kv,
    const fa::AttnTiles& tiles,
    fa::DType dtype,
    int64_t per_core,
    int cores) {
  const int64_t bytes_a_key = quantized_kv_bytes_a_key(
      p.D, p.D_v, kv.bits, kv.group_size, fa::dtype_size(dtype));
  return key_splits_of(hint, p, tiles, bytes_a_key, per_core * cores, cores);
}

/// The GPU family's tiles, chunk policy, key splits and grid
/// (quantized_attention.metal, quantized_attention_kernel.cuh): the general
/// kernel's plan (families/attention/attention_planning.cpp) with this
/// family's kernel choice (quantized_kernel_choice.h). Decode with GQA
/// packs the heads sharing K and V into one block's rows, as the general
/// plan does, unless sinks (one a head) would differ by row.
Support plan_gpu(
    const PlanTarget& target,
    const QuantizedAttentionCall& call,
    QuantizedAttentionPlan& plan) {
  if (Support covered = gpu_kernel_covers(target, call, plan); !covered.ok) {
    return covered;
  }
  if (packs_gqa(plan.params) && !plan.features.has_sinks) {
    pack_gqa_rows(plan);
  }
  const fa::AttnParams& p = plan.params;
  const fa::Backend backend = *target.caps.gpu;
  const QuantizedKernelChoice choice = choose_quantized_kernel(
      p, plan.spec.kv.bits, plan.spec.kv.group_size, plan.dtype, backend,
      target.caps.cores, forced_quantized_tiles(),
      quantized_float_chunks_forced());
  const fa::AttnTiles tiles = choice.tiles;
  plan.tiles = tiles;
  plan.chunks = choice.chunks;
  plan.features.align_q = p.L_q % tiles.bq == 0;
  plan.features.align_k = p.L_k % tiles.bk == 0;
  plan.key_splits = quantized_key_splits(
      plan.spec.attention.hint, p, plan.spec.kv, tiles, plan.dtype,
      choice.per_core, target.caps.cores);
  plan.features.split_keys = plan.key_splits > 1;
  plan.split_merge = merges_in_kernel(backend) && plan.features.split_keys;
  plan.combine_form = split_combine_form(
      backend, plan.key_splits, p, target.caps.cores,
      forced_split_combine_form());
  plan.grid = {
      blocks_of(p.L_q, tiles.bq) * plan.key_splits,
      static_cast<unsigned>(p.H_q),
      static_cast<unsigned>(p.B),
      tiles.warps,
      fa::attention_smem_bytes(tiles, p.D, p.D_v, plan.dtype, backend)};
  if (Support fits = grid_fits(target, p); !fits.ok) {
    return fits;
  }
  return smem_fits(target, "kernel", p, plan.dtype, plan.grid);
}

} // namespace

QuantizedAttentionPlan quantized_attention_plan_for(
    const QuantizedAttentionCall& call,
    const DeviceCaps& caps) {
  QuantizedAttentionPlan plan = shape_plan(call);
  if (!admitted(no_empty_input(call.inputs), plan)) {
    return plan;
  }
  const Support built = family_built(caps, KernelFamily::QuantizedAttention);
  if (caps.cpu) {
    // The CPU kernel takes every head dim and code width the op admits.
    if (admitted(cpu_kernels_take(call.inputs[kQuantQ].dtype(), plan.dtype),
                 plan) &&
        admitted(built, plan)) {
      if (packs_gqa(plan.params)) {
        pack_gqa_rows(plan);
      }
      plan.family = KernelFamily::QuantizedAttention;
    }
    return plan;
  }
  if (!caps.gpu) {
    plan.reason = caps.refusal;
    return plan;
  }
  const PlanTarget target{caps, op_name(caps)};
  if (!caps.refusal.empty()) {
    plan.reason = target.op + caps.refusal;
    return plan;
  }
  if (admitted(plan_gpu(target, call, plan), plan) && admitted(built, plan)) {
    plan.family = KernelFamily::QuantizedAttention;
  }
  return plan;
}

} // namespace mlx_fused_attn
