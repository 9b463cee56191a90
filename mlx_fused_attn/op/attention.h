// The public op: a drop-in for mlx.core.fast.scaled_dot_product_attention.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "mlx/array.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/op/errors.h"
#include "mlx_fused_attn/op/mask_and_sinks.h"

namespace mlx_fused_attn {

/// softmax(scale * q k^T + mask) v, fused where a kernel covers the call and
/// as plain MLX ops otherwise (force_fused raises the reason instead).
mlx::core::array scaled_dot_product_attention(
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    float scale,
    const Mask& mask = {},
    const std::optional<mlx::core::array>& sinks = std::nullopt,
    bool force_fused = false,
    mlx::core::StreamOrDevice s = {});

/// Whether the call above would run a fused kernel, and if not why.
/// Invalid arguments raise exactly as the op does.
std::pair<bool, std::string> can_use_fused(
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    float scale,
    const Mask& mask = {},
    const std::optional<mlx::core::array>& sinks = std::nullopt,
    mlx::core::StreamOrDevice s = {});

} // namespace mlx_fused_attn
