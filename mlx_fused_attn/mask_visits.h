// An array mask's classes by block (kernels/mask_visits.h says what they
// hold), built by MLX ops before the attention kernel runs and memoised per
// mask array: mlx-lm passes one mask to every layer.
#pragma once

#include "mlx/array.h"
#include "mlx/stream.h"
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

/// The lengths of a slice's rows: a visit row (count, off_row, off_col and
/// an entry a key block) and a row of shown bits (whole 32-bit words over
/// whole key blocks).
struct VisitRows {
  int visit;
  int bit_words;
};
VisitRows visit_rows(int L_k, int bk);

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

} // namespace mlx_fused_attn
