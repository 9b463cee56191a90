// The public op: a drop-in for mlx.core.fast.scaled_dot_product_attention.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "mlx/array.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/op/errors.h"
#include "mlx_fused_attn/plan/plan_hint.h"
#include "mlx_fused_attn/plan/plan_summary.h"
#include "mlx_fused_attn/op/mask_and_sinks.h"

namespace mlx_fused_attn {

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

/// The op with return_lse: {out, lse}, lse the rows' log-sum-exp, fp32
/// [B, H_q, L_q], natural log, the sink's logit included, -inf where no key
/// is visible (backward_params.h). Both are differentiable (lse_gradient.h).
std::pair<mlx::core::array, mlx::core::array>
scaled_dot_product_attention_with_lse(
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    float scale,
    const Mask& mask = {},
    const std::optional<mlx::core::array>& sinks = std::nullopt,
    bool force_fused = false,
    mlx::core::StreamOrDevice s = {});

/// dq, dk, dv of the attention of q over k, v at the cotangent `dout` of
/// its output, given that output's `out` and row `lse` in the convention
/// above: the fused backward (plain ops where none runs). `out` and `lse`
/// may be those of a larger attention that this call's keys are a part of:
/// the gradients are then this part's share (ring attention's backward).
std::vector<mlx::core::array> attention_backward(
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    const mlx::core::array& out,
    const mlx::core::array& lse,
    const mlx::core::array& dout,
    float scale,
    const Mask& mask = {},
    mlx::core::StreamOrDevice s = {});

/// The attention of q over k, v merged by LSE into `held_out` and
/// `held_lse`, the output and LSE (convention above) of q over other keys:
/// {out, lse} of q over both key sets, out in the call's dtype (rounded
/// once a merge; the sums in fp32), lse fp32. On the CPU the kernel merges
/// in place (merge_primitive.h); elsewhere a fused call and plain ops. For
/// ring attention's forward, which has its own gradient: not
/// differentiable.
std::pair<mlx::core::array, mlx::core::array> attention_merge(
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    const mlx::core::array& held_out,
    const mlx::core::array& held_lse,
    float scale,
    const Mask& mask = {},
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
