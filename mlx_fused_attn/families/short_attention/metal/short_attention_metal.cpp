// The short-sequence kernel on Metal (short_attention.metal,
// backend/metal/attention_dispatch.h): its pipeline for a plan, and its
// dispatch, the general kernel's buffers with the short kernel's features.
#include <variant>

#include "mlx_fused_attn/backend/metal/attention_dispatch.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/families/short_attention/short_attention_kernel_name.h"
#include "mlx_fused_attn/families/short_attention/short_attention_launch_features.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

/// The short kernel's pipeline for a plan with its tiles.
MetalPipeline short_attention_pipeline(const AttentionPlan& plan) {
  const auto& tiles = std::get<fa::ShortAttnTiles>(plan.tiles);
  const fa::ShortAttnFeatures features = short_features(plan.features);

  MetalPipeline p;
  p.family = KernelFamily::ShortAttention;
  p.kernel_name =
      fa::short_attention_kernel_name(plan.dtype, plan.params.D, tiles);
  p.hash_name = fa::short_attention_pipeline_name(p.kernel_name, features);
#define FA_SHORT_FUNCTION_CONSTANT(name, index) \
  p.constants.push_back({index, features.name});
  FA_SHORT_ATTENTION_FEATURES(FA_SHORT_FUNCTION_CONSTANT)
#undef FA_SHORT_FUNCTION_CONSTANT
  p.threads = size_t(fa::kSimdWidth) * tiles.warps;
  return p;
}

} // namespace

Support prepare_short_attention(
    const AttentionPlan& plan,
    mx::metal::Device& d) {
  return pipeline_ready(d, short_attention_pipeline(plan));
}

void run_short_attention(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    mx::metal::Device& d,
    mx::metal::CommandEncoder& enc) {
  mx::array& out = outputs[0];
  const AttentionBuffers b = attention_buffers(plan, inputs, out, d, enc);
  enc.set_compute_pipeline_state(
      get_pipeline(d, short_attention_pipeline(plan)));
  bind_attention_buffers(b, out, enc);
  dispatch_grid(plan, enc);
}

} // namespace mlx_fused_attn::gpu
