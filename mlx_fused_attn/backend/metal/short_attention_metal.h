// The short-sequence kernel on Metal (metal/short_attention.metal): whether
// it takes a call, and its dispatch. attention_metal.cpp asks first and
// hands the call over, after preparing the inputs and the parameters it
// shares with the general kernel.
#pragma once

#include <optional>
#include <vector>

#include "mlx/array.h"
#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/kernels/short_attention_config.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn::gpu {

/// The short kernel's tiles when it runs this call, else nothing: when it is
/// enabled (short_attention_enabled) and covers the call
/// (short_attention_covers on inputs {q, k, v, ...} of kernel dtype `dtype`).
std::optional<fa::ShortAttnTiles> short_attention_tiles_metal(
    const std::vector<mlx::core::array>& inputs,
    fa::DType dtype);

/// The short kernel's pipeline for a call of head dim `D`.
MetalPipeline short_attention_pipeline(
    const AttentionSpec& spec,
    fa::DType dtype,
    fa::ShortAttnTiles tiles,
    int D);

/// Encodes the short kernel with `pipeline` (short_attention_pipeline's).
/// q, k, v and sinks have unit-stride rows; `params` describes them and
/// `out`; the mask, if any, is inputs[3].
void encode_short_attention(
    mlx::core::metal::CommandEncoder& enc,
    MTL::ComputePipelineState* pipeline,
    const AttentionSpec& spec,
    fa::ShortAttnTiles tiles,
    const fa::AttnParams& params,
    const std::vector<mlx::core::array>& inputs,
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    const mlx::core::array& sinks,
    mlx::core::array& out);

} // namespace mlx_fused_attn::gpu
