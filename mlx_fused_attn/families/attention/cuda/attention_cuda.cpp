// The general kernel's launch on CUDA (backend/cuda/attention_launch.h):
// its kernel and, with split keys merged by a kernel of their own, the
// combine; K and V through tensor maps for a producer warpgroup; the
// partials of split keys and the LSE where the plan has them.
#include <stdexcept>
#include <variant>

#include "mlx_fused_attn/backend/cuda/attention_launch.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/tensor_map.h"
#include "mlx_fused_attn/families/attention/cuda/attention_kernel_key.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;

namespace {

/// The general kernel of a plan with its tiles.
AttentionKernelKey general_key(const AttentionPlan& plan) {
  return {
      plan.dtype,
      plan.params.D,
      plan.params.D_v,
      std::get<fa::AttnTiles>(plan.tiles),
      plan.features.causal,
      plan.features.has_mask};
}

/// The combine of the plan's split keys, in its form.
SplitCombineKernelKey combine_key(const AttentionPlan& plan) {
  return {plan.dtype, plan.combine_form};
}

/// Registers the outputs beside `out` that the kernel writes: the LSE,
/// the partials of split keys, the counters of the last split (after the
/// node that zeroes them).
void write_outputs(
    const std::vector<mx::array>& outputs,
    const SplitPartials& parts,
    mx::cu::CommandEncoder& enc) {
  if (outputs.size() > 1) {
    enc.set_output_array(outputs[1]);
  }
  write_partials(parts, enc);
}

} // namespace

Support prepare_attention(const AttentionPlan& plan, int device, int arch) {
  if (plan.key_splits > 1 && !plan.split_merge) {
    if (Support ready =
            kernel_ready(combine_key(plan), device, arch);
        !ready.ok) {
      return ready;
    }
  }
  return kernel_ready(general_key(plan), device, arch);
}

void run_attention(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    const Launch& at) {
  const fa::AttnTiles& tiles = std::get<fa::AttnTiles>(plan.tiles);
  // The backward's LSE, where the primitive asked for it (outputs[1]); a
  // plan that saves it splits keys only where the last split merges
  // (plan_general_launch).
  fa::AttnFeatures features = plan.features;
  features.has_lse = outputs.size() > 1;
  if (features.has_lse && plan.key_splits > 1 && !plan.split_merge) {
    throw std::logic_error(
        "[FusedAttention] internal error: split keys with the LSE");
  }
  // A producer warpgroup copies K and V through tensor maps.
  const AttentionRun run = start_run(plan, inputs, outputs, tiles.producer, at);
  mx::array& out = outputs[0];
  float* lse = features.has_lse ? mx::gpu_ptr<float>(outputs[1]) : nullptr;
  const SplitPartials& parts = run.parts;
  write_outputs(outputs, parts, at.enc);
  const CUfunction function =
      kernel_function(general_key(plan), at.device, at.arch);
  if (tiles.producer) {
    add_attention_node(
        at, function, plan, run, out, features, parts.o_part_ptr,
        parts.stats_ptr, parts.counters_ptr, plan.key_splits, lse,
        run.in.visits_ptr, panel_tensor_map(run.in.k, plan.dtype, tiles.bk),
        panel_tensor_map(run.in.v, plan.dtype, tiles.bk));
  } else {
    add_attention_node(
        at, function, plan, run, out, features, parts.o_part_ptr,
        parts.stats_ptr, parts.counters_ptr, plan.key_splits, lse,
        run.in.visits_ptr);
  }
  if (parts.o_part && !plan.split_merge) {
    add_combine_node(
        at.enc,
        kernel_function(combine_key(plan), at.device, at.arch),
        plan.combine_form, run.params, plan.key_splits, parts, out);
  }
}

} // namespace mlx_fused_attn::cuda
