// Neighborhood attention as plain MLX ops (attention with the explicit
// [L, L] neighborhood mask): the path for calls no fused kernel covers, and
// the definition the primitive's gradients are taken from.
#pragma once

#include "mlx_fused_attn/plan/na_call.h"

namespace mlx_fused_attn {

mlx::core::array neighborhood_fallback(
    const NaSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::Stream s);

} // namespace mlx_fused_attn
