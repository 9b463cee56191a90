// The layout of an array mask's block lists (kernels/mask_visits.h says
// what they hold): the row lengths of the forward's classes by block and of
// the backward's lists, from the shapes and tiles a plan fixes. The lists
// themselves are built by MLX ops (op/mask_block_lists.h); the backends
// read this layout into the kernels' parameters at eval (launch_params.h).
#pragma once

#include "mlx/dtype.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn {

/// Bits of a word of shown bits.
constexpr int kMaskListWordBits = 32;

/// The lengths of a slice's rows: a visit row (count, off_row, off_col and
/// an entry a key block) and a row of shown bits (whole 32-bit words over
/// whole key blocks).
struct VisitRows {
  int visit;
  int bit_words;
};
inline VisitRows visit_rows(int L_k, int bk) {
  const int unit = bk > kMaskListWordBits ? bk : kMaskListWordBits;
  return {
      (L_k + bk - 1) / bk + 3,
      (L_k + unit - 1) / unit * (unit / kMaskListWordBits)};
}

/// What the backward's lists are built for: the mask's kind and dtype, the
/// [L_q, L_k] scores and the two kernels' blocks (a dK/dV row is a block of
/// dkdv_keys keys listing blocks of dkdv_queries queries; a dQ row a block
/// of dq_queries queries listing blocks of dq_keys keys).
struct BwdListGrid {
  MaskKind kind;
  mlx::core::Dtype dtype;
  int L_q;
  int L_k;
  int dkdv_keys;
  int dkdv_queries;
  int dq_queries;
  int dq_keys;

  bool operator==(const BwdListGrid& o) const {
    return kind == o.kind && dtype == o.dtype && L_q == o.L_q &&
        L_k == o.L_k && dkdv_keys == o.dkdv_keys &&
        dkdv_queries == o.dkdv_queries && dq_queries == o.dq_queries &&
        dq_keys == o.dq_keys;
  }
};

/// A slice's layout (kernels/mask_visits.h): the length of a dK/dV row,
/// the words a key of the dK/dV kernel's shown bits (a bool mask's; none
/// for an additive one), where the dQ rows start, the length of a dQ row,
/// the words a query of the dQ kernel's shown bits, and the whole. The
/// kernels find their bits past their rows (attention_backward.h).
struct BwdListRows {
  int dkdv_row;
  int dkdv_bit_words;
  int dq_start;
  int dq_row;
  int dq_bit_words;
  int total;
};
inline BwdListRows backward_list_rows(const BwdListGrid& g) {
  const auto blocks = [](int n, int b) { return (n + b - 1) / b; };
  const bool bits = g.kind == MaskKind::Bool;
  const int dkdv_rows = blocks(g.L_k, g.dkdv_keys);
  const int dq_rows = blocks(g.L_q, g.dq_queries);
  BwdListRows r;
  r.dkdv_row = 1 + blocks(g.L_q, g.dkdv_queries);
  r.dkdv_bit_words = bits ? visit_rows(g.L_q, g.dkdv_queries).bit_words : 0;
  r.dq_start = dkdv_rows * r.dkdv_row +
      dkdv_rows * g.dkdv_keys * r.dkdv_bit_words;
  r.dq_row = 1 + blocks(g.L_k, g.dq_keys);
  r.dq_bit_words = bits ? visit_rows(g.L_k, g.dq_keys).bit_words : 0;
  r.total = r.dq_start + dq_rows * r.dq_row +
      dq_rows * g.dq_queries * r.dq_bit_words;
  return r;
}

} // namespace mlx_fused_attn
