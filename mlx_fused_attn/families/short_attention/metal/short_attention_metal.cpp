#include "mlx_fused_attn/families/short_attention/metal/short_attention_metal.h"

#include "mlx_fused_attn/families/short_attention/short_attention_features.h"
#include "mlx_fused_attn/families/short_attention/short_attention_kernel_name.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::gpu {

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

} // namespace mlx_fused_attn::gpu
