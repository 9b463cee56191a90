// An array mask's classes by block (kernels/mask_visits.h says what they
// hold), built by MLX ops before the attention kernel runs and memoised per
// mask array: mlx-lm passes one mask to every layer.
#pragma once

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/plan/mask_list_layout.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn {

/// What the classes are built for: the mask's kind (bool, or additive once
/// cast to `dtype`), the [L_q, L_k] scores and the kernel's tiles.
struct VisitGrid {
  MaskKind kind;
  mlx::core::Dtype dtype;
  int L_q;
  int L_k;
  int bq; ///< rows of a query block
  int bk; ///< keys of a key block

  bool operator==(const VisitGrid& o) const {
    return kind == o.kind && dtype == o.dtype && L_q == o.L_q &&
        L_k == o.L_k && bq == o.bq && bk == o.bk;
  }
};

/// The classes of every (query block, key block) under `mask` (rank <= 4,
/// broadcasting to [B, H, L_q, L_k]): uint32 [B_m, H_m, n_qb * visit +
/// n_qb * bq * bit_words], where B_m and H_m are the mask's own batch and
/// heads (1 or B, H).
mlx::core::array
mask_visits(const mlx::core::array& mask, const VisitGrid& g, mlx::core::Stream s);

/// mask_visits, built once per (mask array, grid, stream) while the mask
/// lives in a small recent-first cache.
mlx::core::array cached_mask_visits(
    const mlx::core::array& mask,
    const VisitGrid& g,
    mlx::core::Stream s);

/// The backward's block lists under `mask` (rank <= 4, broadcasting to [B,
/// H, L_q, L_k]): uint32 [B_m, H_m, total], B_m and H_m the mask's own.
mlx::core::array backward_mask_lists(
    const mlx::core::array& mask,
    const BwdListGrid& g,
    mlx::core::Stream s);

/// backward_mask_lists, memoised by `visits`, the forward's classes of the
/// same mask where cached_mask_visits holds them (one array per mask
/// array): the forward of every layer under one mask reads the same
/// classes, so their backwards share one build.
mlx::core::array cached_backward_mask_lists(
    const mlx::core::array& visits,
    const mlx::core::array& mask,
    const BwdListGrid& g,
    mlx::core::Stream s);

} // namespace mlx_fused_attn
