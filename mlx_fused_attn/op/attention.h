// The public op: a drop-in for mlx.core.fast.scaled_dot_product_attention.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "mlx/array.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/op/errors.h"
#include "mlx_fused_attn/plan/plan_hint.h"
#include "mlx_fused_attn/plan/plan_summary.h"

namespace mlx_fused_attn {

/// None, the string "causal", or a boolean / additive array broadcastable to
/// [B, H_q, L_q, L_k].
using Mask = std::variant<std::monostate, std::string, mlx::core::array>;

/// softmax(scale * q k^T + mask) v, fused where a kernel covers the call and
/// as plain MLX ops otherwise (force_fused raises the reason instead);
/// `hint` picks among the plans that compute it (plan_hint.h).
mlx::core::array scaled_dot_product_attention(
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    float scale,
    const Mask& mask = {},
    const std::optional<mlx::core::array>& sinks = std::nullopt,
    bool force_fused = false,
    mlx::core::StreamOrDevice s = {},
    const PlanHint& hint = {});

/// Whether the call above would run a fused kernel, and if not why.
/// Invalid arguments raise exactly as the op does.
std::pair<bool, std::string> can_use_fused(
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    float scale,
    const Mask& mask = {},
    const std::optional<mlx::core::array>& sinks = std::nullopt,
    mlx::core::StreamOrDevice s = {},
    const PlanHint& hint = {});

/// The plan of the call above, summarized (family, tiles, key splits, a
/// reason code and its message). Invalid arguments raise as the op does.
PlanSummary plan_summary(
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    float scale,
    const Mask& mask = {},
    const std::optional<mlx::core::array>& sinks = std::nullopt,
    mlx::core::StreamOrDevice s = {},
    const PlanHint& hint = {});

} // namespace mlx_fused_attn
