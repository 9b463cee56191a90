// The key-block visit list of an array mask (kernels/mask_visits.h says
// what it holds), built by MLX ops before the attention kernel runs and
// memoised per mask array: mlx-lm passes one mask to every layer.
#pragma once

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn {

/// Which query blocks, of `bq` rows, visit which key blocks, of `bk` keys,
/// under `mask` (rank <= 4, broadcasting to [B, H, L_q, L_k]; bool, or
/// additive once cast to `dtype`, as `kind` says): int32 [B_m, H_m, n_qb,
/// n_kb + 1], where B_m and H_m are the mask's own batch and heads (1 or
/// B, H).
mlx::core::array mask_visits(
    const mlx::core::array& mask,
    MaskKind kind,
    mlx::core::Dtype dtype,
    int L_q,
    int L_k,
    int bq,
    int bk,
    mlx::core::Stream s);

/// mask_visits, built once per (mask array, arguments) while the mask lives
/// in a small recent-first cache.
mlx::core::array cached_mask_visits(
    const mlx::core::array& mask,
    MaskKind kind,
    mlx::core::Dtype dtype,
    int L_q,
    int L_k,
    int bq,
    int bk,
    mlx::core::Stream s);

} // namespace mlx_fused_attn
