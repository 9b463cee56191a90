// The general kernel's dispatch on Metal (backend/metal/attention_dispatch.h):
// its pipeline (with 32-bit offsets where the strides allow them) and,
// with split keys, the combine; the LSE and the mask's visit list where the
// plan has them.
#include <optional>
#include <stdexcept>
#include <variant>

#include "mlx/allocator.h"
#include "mlx_fused_attn/backend/metal/attention_dispatch.h"
#include "mlx_fused_attn/backend/metal/attention_step_pipeline.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/backend/metal/split_partials.h"
#include "mlx_fused_attn/families/attention/metal/attention_variant.h"
#include "mlx_fused_attn/kernels/attention_kernel_name.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

/// The general kernel's pipeline for a plan with its tiles.
MetalPipeline general_pipeline(const AttentionPlan& plan) {
  const auto& tiles = std::get<fa::AttnTiles>(plan.tiles);
  return attention_step_pipeline(
      KernelFamily::Attention,
      fa::attention_kernel_name(
          plan.dtype, plan.params.D, plan.params.D_v, tiles),
      plan.features, tiles.warps);
}

/// The combine of split keys (split_keys.h), in the general kernel's
/// library.
MetalPipeline general_combine_pipeline(fa::DType dtype) {
  return split_combine_pipeline(
      KernelFamily::Attention, fa::split_combine_kernel_name(dtype));
}

/// Binds the LSE, where the primitive asked for it (outputs[1]); a plan
/// that saves it has no split keys (plan_general_launch).
void bind_lse(
    const AttentionPlan& plan,
    std::vector<mx::array>& outputs,
    mx::metal::CommandEncoder& enc) {
  if (plan.key_splits > 1) {
    throw std::logic_error(
        "[FusedAttention] internal error: split keys with the LSE");
  }
  outputs[1].set_data(mx::allocator::malloc(outputs[1].nbytes()));
  enc.set_output_array(outputs[1], 10);
}

} // namespace

Support prepare_attention(const AttentionPlan& plan, mx::metal::Device& d) {
  // Strides are known at eval: run drops stride32 where offsets need 64
  // bits, so the 64-bit pipeline is built here too, not first inside eval.
  if (plan.features.stride32) {
    AttentionPlan wide = plan;
    wide.features.stride32 = false;
    if (Support ready = pipeline_ready(d, general_pipeline(wide)); !ready.ok) {
      return ready;
    }
  }
  if (plan.key_splits > 1) {
    if (Support ready = pipeline_ready(d, general_combine_pipeline(plan.dtype));
        !ready.ok) {
      return ready;
    }
  }
  return pipeline_ready(d, general_pipeline(plan));
}

void run_attention(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    mx::metal::Device& d,
    mx::metal::CommandEncoder& enc) {
  mx::array& out = outputs[0];
  const AttentionBuffers b = attention_buffers(plan, inputs, out, d, enc);
  AttentionPlan run_plan = plan;
  run_plan.features.has_lse = outputs.size() > 1;
  if (plan.features.stride32) {
    run_plan.features.stride32 =
        stride32_fits(b.params, std::get<fa::AttnTiles>(plan.tiles).bk);
  }
  enc.set_compute_pipeline_state(get_pipeline(d, general_pipeline(run_plan)));
  bind_attention_buffers(b, out, enc);
  if (run_plan.features.has_lse) {
    bind_lse(plan, outputs, enc);
  }
  std::optional<SplitPartials> parts;
  if (plan.key_splits > 1) {
    parts = bind_split_partials(b.params, plan.key_splits, enc);
  }
  if (b.visits != nullptr) {
    enc.set_input_array(*b.visits, 11);
  }
  dispatch_grid(plan, enc);
  if (parts) {
    combine_splits(
        general_combine_pipeline(plan.dtype), b.params, plan.key_splits,
        *parts, out, d, enc);
  }
}

} // namespace mlx_fused_attn::gpu
