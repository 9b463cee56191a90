#include "mlx_fused_attn/backend/metal/short_attention_metal.h"

#include <cstdint>
#include <limits>

#include "mlx_fused_attn/backend/short_attention_switch.h"
#include "mlx_fused_attn/kernels/short_attention_features.h"
#include "mlx_fused_attn/kernels/short_attention_names.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

std::optional<fa::ShortAttnTiles> short_attention_tiles_metal(
    const std::vector<mx::array>& inputs,
    fa::DType dtype) {
  const mx::array& q = inputs[0];
  const int L_q = q.shape(2);
  const int L_k = inputs[1].shape(2);
  const int D = q.shape(3);
  // The kernel numbers sequences with an int.
  const int64_t sequences = int64_t(q.shape(0)) * q.shape(1);
  if (!short_attention_enabled() ||
      !fa::short_attention_covers(
          L_q, L_k, D, inputs[2].shape(3), dtype, fa::Backend::Metal) ||
      sequences > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return fa::choose_short_attention_tiles(
      D, dtype, fa::Backend::Metal, fa::short_attention_seq(L_q, L_k));
}

MetalPipeline short_attention_pipeline(
    const AttentionSpec& spec,
    fa::DType dtype,
    fa::ShortAttnTiles tiles,
    int D) {
  fa::ShortAttnFeatures features{};
  features.has_mask =
      spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive;
  features.bool_mask = spec.mask == MaskKind::Bool;
  features.causal = spec.mask == MaskKind::Causal;
  features.has_sinks = spec.has_sinks;

  MetalPipeline p;
  p.family = KernelFamily::ShortAttention;
  p.kernel_name = fa::short_attention_kernel_name(dtype, D, tiles);
  p.hash_name = fa::short_attention_pipeline_name(p.kernel_name, features);
#define FA_SHORT_FUNCTION_CONSTANT(name, index) \
  p.constants.push_back({index, features.name});
  FA_SHORT_ATTENTION_FEATURES(FA_SHORT_FUNCTION_CONSTANT)
#undef FA_SHORT_FUNCTION_CONSTANT
  p.threads = size_t(fa::kSimdWidth) * tiles.warps;
  return p;
}

void encode_short_attention(
    mx::metal::CommandEncoder& enc,
    MTL::ComputePipelineState* pipeline,
    const AttentionSpec& spec,
    fa::ShortAttnTiles tiles,
    const fa::AttnParams& params,
    const std::vector<mx::array>& inputs,
    const mx::array& q,
    const mx::array& k,
    const mx::array& v,
    const mx::array& sinks,
    mx::array& out) {
  const bool has_mask =
      spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive;
  enc.set_compute_pipeline_state(pipeline);
  enc.set_input_array(q, 0);
  enc.set_input_array(k, 1);
  enc.set_input_array(v, 2);
  enc.set_output_array(out, 3);
  enc.set_bytes(params, 4);
  if (has_mask) {
    enc.set_input_array(inputs[3], 5);
  }
  if (spec.has_sinks) {
    enc.set_input_array(sinks, 6);
  }

  const int64_t sequences = int64_t(params.B) * params.H_q;
  const MTL::Size grid(
      static_cast<size_t>((sequences + tiles.problems - 1) / tiles.problems),
      1,
      1);
  const MTL::Size group(fa::kSimdWidth, tiles.warps, 1);
  enc.dispatch_threadgroups(grid, group);
}

} // namespace mlx_fused_attn::gpu
