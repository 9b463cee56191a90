// The gradient of the row log-sum-exp that scaled_dot_product_attention
// returns with return_lse. With P = softmax(scale * q k^T + mask) (the sink's
// logit in the row), dLSE_i = sum_j P_ij dS_ij, so a cotangent g of the LSE
// gives
//   dq_i  = scale * g_i * sum_j P_ij k_j   (attention with k as the values)
//   dk_j  = scale * sum_i P_ij g_i q_i     (the dV of a fused backward whose
//                                           dO is g q)
//   dsink = sum_i g_i exp(sink - LSE_i),   dv = 0,
// each through a fused kernel, without the L_q x L_k scores.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn {

/// The gradients for `argnums` of the forward's inputs `primals` {q, k,
/// v[, mask][, sinks]} from the cotangent of its LSE `lse`. Rows whose LSE
/// is -inf (no key visible) are constant and get none.
std::vector<mlx::core::array> lse_vjp(
    const AttentionSpec& spec,
    const std::vector<mlx::core::array>& primals,
    const mlx::core::array& lse,
    const mlx::core::array& cotangent,
    const std::vector<int>& argnums,
    mlx::core::Stream s);

} // namespace mlx_fused_attn
