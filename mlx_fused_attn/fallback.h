// Attention as plain MLX ops: the path for calls no fused kernel covers, and
// the definition the primitive's gradients and vmap are taken from.
#pragma once

#include "mlx_fused_attn/call.h"

namespace mlx_fused_attn {

mlx::core::array attention_fallback(
    const AttentionSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::Stream s);

} // namespace mlx_fused_attn
