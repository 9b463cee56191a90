// Attention as plain MLX ops: the path for calls no fused kernel covers, and
// the definition the primitives' gradients and vmap are taken from.
#pragma once

#include "mlx_fused_attn/plan/call.h"

namespace mlx_fused_attn {

mlx::core::array attention_fallback(
    const AttentionSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::Stream s);

/// The row log-sum-exp the fused forward saves for its backward, as plain
/// MLX ops: fp32 [B, H_q, L_q], in the convention of backward_params.h.
mlx::core::array attention_lse_fallback(
    const AttentionSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::Stream s);

} // namespace mlx_fused_attn
