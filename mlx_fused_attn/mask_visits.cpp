#include "mlx_fused_attn/mask_visits.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <list>
#include <mutex>
#include <optional>

#include "mlx/ops.h"
#include "mlx_fused_attn/launch_plan.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

// Must match kernels/mask_visits.h.
constexpr int kShown = 0;
constexpr int kTwoValued = 1;
constexpr int kValues = 2;
constexpr int kTwoValuedScaled = 3;
constexpr int kWordBits = 32;

/// x [..., n, m] padded with `value` to [..., rows, cols].
array pad_to(const array& x, int rows, int cols, const array& value, Stream s) {
  const int nd = static_cast<int>(x.ndim());
  return pad(
      x, {nd - 2, nd - 1}, {0, 0}, {rows - x.shape(-2), cols - x.shape(-1)},
      value, "constant", s);
}

/// all (or any) over each bq x bk block of x [Bm, Hm, n_qb * bq, n_kb * bk].
array block_reduce(const array& x, int bq, int bk, bool every, Stream s) {
  const Shape blocks = {
      x.shape(0), x.shape(1), x.shape(2) / bq, bq, x.shape(3) / bk, bk};
  const array b = reshape(x, blocks, s);
  return every ? all(b, {3, 5}, false, s) : any(b, {3, 5}, false, s);
}

} // namespace

VisitRows visit_rows(int L_k, int bk) {
  const int unit = std::max(bk, kWordBits);
  return {(L_k + bk - 1) / bk + 3, (L_k + unit - 1) / unit * (unit / kWordBits)};
}

array mask_visits(const array& mask, const VisitGrid& g, Stream s) {
  const int L_q = g.L_q, L_k = g.L_k, bq = g.bq, bk = g.bk;
  Shape shape4(4 - mask.ndim(), 1);
  shape4.insert(shape4.end(), mask.shape().begin(), mask.shape().end());
  const int Bm = shape4[0], Hm = shape4[1];
  const array m = broadcast_to(reshape(mask, shape4, s), {Bm, Hm, L_q, L_k}, s);
  const int n_qb = (L_q + bq - 1) / bq, n_kb = (L_k + bk - 1) / bk;
  const int Pq = n_qb * bq, Pk = n_kb * bk;
  const array yes(true), no(false);
  // A score is hidden where the kernel would make it the masked score or
  // -inf (attention_masks.h), shown where the mask leaves it unchanged.
  array hidden = logical_not(m, s), shown = m;
  std::optional<array> values;
  if (g.kind == MaskKind::Additive) {
    values = astype(astype(m, g.dtype, s), float32, s);
    const array m2 = multiply(*values, array(kLog2e), s);
    hidden = less(m2, array(-0.5f * FLT_MAX), s);
    shown = equal(m2, array(0.0f), s);
  }
  // A row that sees no key keeps every block, for MLX's softmax over all.
  // Bool masks read the bits of those blocks, scaled first so that every
  // hidden score is the one masked score; additive ones every value (a row
  // of -inf has no off value).
  const array dead_rows = all(hidden, -1, true, s);
  const array dead = block_reduce(pad_to(dead_rows, Pq, 1, no, s), bq, 1, false, s);
  const array hidden_all =
      block_reduce(pad_to(hidden, Pq, Pk, yes, s), bq, bk, true, s);
  const array hidden_b = logical_and(hidden_all, logical_not(dead, s), s);
  const array shown_pad = pad_to(shown, Pq, Pk, yes, s);
  const array shown_b = block_reduce(shown_pad, bq, bk, true, s);

  // Two-valued blocks: each score shown or the query block's off value, the
  // least mask value outside shown scores, NaN and hidden blocks (bool:
  // hidden).
  array two_b = full({Bm, Hm, n_qb, n_kb}, true, s);
  array off_row = zeros({Bm, Hm, n_qb, 1}, uint32, s);
  array off_col = off_row;
  if (values) {
    const Shape blocks6 = {Bm, Hm, n_qb, bq, n_kb, bk};
    const Shape rows3 = {Bm, Hm, n_qb, bq * Pk};
    const array v6 = reshape(pad_to(*values, Pq, Pk, array(0.0f), s), blocks6, s);
    const array out_of_play = logical_or(
        logical_or(reshape(shown_pad, blocks6, s), isnan(v6, s), s),
        reshape(hidden_all, {Bm, Hm, n_qb, 1, n_kb, 1}, s), s);
    const array candidates = reshape(
        where(out_of_play, array(INFINITY), v6, s), rows3, s);
    const array at = astype(argmin(candidates, -1, true, s), uint32, s);
    const array off = take_along_axis(reshape(v6, rows3, s), at, -1, s);
    const array is_two = logical_or(
        reshape(shown_pad, blocks6, s),
        equal(v6, reshape(off, {Bm, Hm, n_qb, 1, 1, 1}, s), s), s);
    two_b = all(is_two, {3, 5}, false, s);
    const array first_row = reshape(
        multiply(arange(n_qb, uint32, s), array(bq, uint32), s),
        {1, 1, n_qb, 1}, s);
    off_row = add(first_row, floor_divide(at, array(Pk, uint32), s), s);
    off_col = remainder(at, array(Pk, uint32), s);
  }
  const array kind = where(
      dead, array(values ? kValues : kTwoValuedScaled),
      where(shown_b, array(kShown),
            where(two_b, array(kTwoValued), array(kValues), s), s), s);

  // Visited blocks first, in order: hidden ones sort past n_kb.
  const array kb = arange(n_kb, int32, s);
  const array order = sort(
      where(hidden_b, add(kb, array(n_kb), s), kb, s), -1, s);
  const array block = remainder(order, array(n_kb), s);
  const array entries = astype(
      add(multiply(block, array(4), s),
          take_along_axis(astype(kind, int32, s), block, -1, s), s),
      uint32, s);
  const array count = astype(
      sum(logical_not(hidden_b, s), -1, true, s), uint32, s);
  const array visit = concatenate({count, off_row, off_col, entries}, -1, s);

  // The shown bits, a uint32 word per 32 keys of a row.
  const int words = visit_rows(L_k, bk).bit_words;
  const array bit_of = reshape(
      left_shift(array(1u), arange(kWordBits, uint32, s), s),
      {1, 1, 1, 1, kWordBits}, s);
  const array bits = astype(
      sum(multiply(
              reshape(
                  astype(pad_to(shown, Pq, words * kWordBits, no, s), uint32, s),
                  {Bm, Hm, Pq, words, kWordBits}, s),
              bit_of, s),
          -1, false, s),
      uint32, s);
  // No derivative: a transform must not differentiate the ops that build
  // the classes (a gather has none for its indices).
  return stop_gradient(
      concatenate(
          {reshape(visit, {Bm, Hm, -1}, s), reshape(bits, {Bm, Hm, -1}, s)},
          2, s),
      s);
}

array cached_mask_visits(const array& mask, const VisitGrid& g, Stream s) {
  // Under a transform the mask is a tracer, rebuilt each trace.
  if (mask.is_tracer()) {
    return mask_visits(mask, g, s);
  }
  // An entry holds its mask, so no other array can take the mask's id while
  // the entry lives, and MLX does not donate (overwrite) a buffer that the
  // cache still references: a hit is always the same, unchanged mask.
  struct Entry {
    array mask;
    VisitGrid grid;
    Stream stream;
    array visits;
  };
  static std::mutex lock;
  static std::list<Entry> entries;
  constexpr size_t kCapacity = 4;
  std::lock_guard<std::mutex> guard(lock);
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (it->mask.id() == mask.id() && it->grid == g && it->stream == s) {
      entries.splice(entries.begin(), entries, it);
      return it->visits;
    }
  }
  array visits = mask_visits(mask, g, s);
  entries.push_front({mask, g, s, visits});
  if (entries.size() > kCapacity) {
    entries.pop_back();
  }
  return visits;
}

} // namespace mlx_fused_attn
