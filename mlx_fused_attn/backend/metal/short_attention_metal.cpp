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

void encode_short_attention(
    mx::metal::Device& d,
    mx::metal::CommandEncoder& enc,
    MTL::Library* library,
    const AttentionSpec& spec,
    fa::DType dtype,
    fa::ShortAttnTiles tiles,
    const fa::AttnParams& params,
    const std::vector<mx::array>& inputs,
    const mx::array& q,
    const mx::array& k,
    const mx::array& v,
    const mx::array& sinks,
    mx::array& out) {
  fa::ShortAttnFeatures features{};
  features.has_mask =
      spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive;
  features.bool_mask = spec.mask == MaskKind::Bool;
  features.causal = spec.mask == MaskKind::Causal;
  features.has_sinks = spec.has_sinks;

  mx::metal::MTLFCList function_constants = {
#define FA_SHORT_FUNCTION_CONSTANT(name, index) \
  {&features.name, MTL::DataType::DataTypeBool, index},
      FA_SHORT_ATTENTION_FEATURES(FA_SHORT_FUNCTION_CONSTANT)
#undef FA_SHORT_FUNCTION_CONSTANT
  };

  const std::string kernel_name =
      fa::short_attention_kernel_name(dtype, params.D, tiles);
  auto* kernel = d.get_kernel(
      /* base_name = */ kernel_name,
      /* mtl_lib = */ library,
      /* hash_name = */
      fa::short_attention_pipeline_name(kernel_name, features),
      /* func_consts = */ function_constants);

  enc.set_compute_pipeline_state(kernel);
  enc.set_input_array(q, 0);
  enc.set_input_array(k, 1);
  enc.set_input_array(v, 2);
  enc.set_output_array(out, 3);
  enc.set_bytes(params, 4);
  if (features.has_mask) {
    enc.set_input_array(inputs[3], 5);
  }
  if (features.has_sinks) {
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
