#include "mlx_fused_attn/op/mask_block_lists.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <list>
#include <mutex>
#include <optional>
#include <vector>

#include "mlx/ops.h"
#include "mlx_fused_attn/plan/launch_plan.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

// Must match kernels/mask_visits.h.
constexpr int kShown = 0;
constexpr int kTwoValued = 1;
constexpr int kValues = 2;
constexpr int kTwoValuedScaled = 3;
constexpr int kWordBits = kMaskListWordBits;

/// x [..., n, m] padded with `value` to [..., rows, cols].
array pad_to(const array& x, int rows, int cols, const array& value, Stream s) {
  if (x.shape(-2) == rows && x.shape(-1) == cols) {
    return x;
  }
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

/// Where each score of the mask, broadcast to [Bm, Hm, L_q, L_k] (its own
/// batch and heads), is hidden or shown: hidden where the kernel would make
/// it the masked score or -inf (attention_masks.h), shown where the mask
/// leaves it unchanged; an additive mask's values as the kernel reads them.
struct ScoreClasses {
  int Bm;
  int Hm;
  array hidden;
  array shown;
  std::optional<array> values;
};

ScoreClasses score_classes(
    const array& mask,
    MaskKind kind,
    Dtype dtype,
    int L_q,
    int L_k,
    Stream s) {
  Shape shape4(4 - mask.ndim(), 1);
  shape4.insert(shape4.end(), mask.shape().begin(), mask.shape().end());
  const int Bm = shape4[0], Hm = shape4[1];
  const array m = broadcast_to(reshape(mask, shape4, s), {Bm, Hm, L_q, L_k}, s);
  if (kind != MaskKind::Additive) {
    return {Bm, Hm, logical_not(m, s), m, std::nullopt};
  }
  const array values = astype(astype(m, dtype, s), float32, s);
  const array m2 = multiply(values, array(kLog2e), s);
  return {
      Bm, Hm, less(m2, array(-0.5f * FLT_MAX), s), equal(m2, array(0.0f), s),
      values};
}

/// Per bq x bk block of the scores: whether a row of it sees no key (dead,
/// [Bm, Hm, n_qb, 1]), and whether every score is hidden or shown (rows and
/// keys past the ends count as both).
struct BlockClasses {
  array dead;
  array hidden;
  array shown;
};

BlockClasses block_classes(const ScoreClasses& c, int bq, int bk, Stream s) {
  const int L_q = c.hidden.shape(2), L_k = c.hidden.shape(3);
  const int Pq = (L_q + bq - 1) / bq * bq, Pk = (L_k + bk - 1) / bk * bk;
  const array yes(true), no(false);
  const array dead_rows = all(c.hidden, -1, true, s);
  return {
      block_reduce(pad_to(dead_rows, Pq, 1, no, s), bq, 1, false, s),
      block_reduce(pad_to(c.hidden, Pq, Pk, yes, s), bq, bk, true, s),
      block_reduce(pad_to(c.shown, Pq, Pk, yes, s), bq, bk, true, s)};
}

/// A visit row per row of `skipped` [..., n, n_cols]: the count of columns
/// not skipped, then col * 4 + kind of each, col ascending (skipped ones
/// sort past the count).
std::pair<array, array>
visit_entries(const array& skipped, const array& kind, Stream s) {
  const int n_cols = skipped.shape(-1);
  const array col = arange(n_cols, int32, s);
  const array order = sort(
      where(skipped, add(col, array(n_cols), s), col, s), -1, s);
  const array listed = remainder(order, array(n_cols), s);
  const array entries = astype(
      add(multiply(listed, array(4), s),
          take_along_axis(astype(kind, int32, s), listed, -1, s), s),
      uint32, s);
  const array count =
      astype(sum(logical_not(skipped, s), -1, true, s), uint32, s);
  return {count, entries};
}

/// The shown bits of `shown` [Bm, Hm, n, m] as rows of uint32 words, bit c
/// of a row set where column c is shown: [Bm, Hm, rows, words], the rows
/// and columns past n and m clear.
array shown_bits(const array& shown, int rows, int words, Stream s) {
  const array bit_of = reshape(
      left_shift(array(1u), arange(kWordBits, uint32, s), s),
      {1, 1, 1, 1, kWordBits}, s);
  return astype(
      sum(multiply(
              reshape(
                  astype(pad_to(shown, rows, words * kWordBits, array(false), s), uint32, s),
                  {shown.shape(0), shown.shape(1), rows, words, kWordBits}, s),
              bit_of, s),
          -1, false, s),
      uint32, s);
}

} // namespace

array mask_visits(const array& mask, const VisitGrid& g, Stream s) {
  const int L_q = g.L_q, L_k = g.L_k, bq = g.bq, bk = g.bk;
  const ScoreClasses c = score_classes(mask, g.kind, g.dtype, L_q, L_k, s);
  const int Bm = c.Bm, Hm = c.Hm;
  const int n_qb = (L_q + bq - 1) / bq, n_kb = (L_k + bk - 1) / bk;
  const int Pq = n_qb * bq, Pk = n_kb * bk;
  // A row that sees no key keeps every block, for MLX's softmax over all.
  // Bool masks read the bits of those blocks, scaled first so that every
  // hidden score is the one masked score; additive ones every value (a row
  // of -inf has no off value).
  const BlockClasses b = block_classes(c, bq, bk, s);
  const array hidden_b = logical_and(b.hidden, logical_not(b.dead, s), s);
  const array shown_pad = pad_to(c.shown, Pq, Pk, array(true), s);

  // Two-valued blocks: each score shown or the query block's off value, the
  // least mask value outside shown scores, NaN and hidden blocks (bool:
  // hidden).
  array two_b = full({Bm, Hm, n_qb, n_kb}, true, s);
  array off_row = zeros({Bm, Hm, n_qb, 1}, uint32, s);
  array off_col = off_row;
  if (c.values) {
    const Shape blocks6 = {Bm, Hm, n_qb, bq, n_kb, bk};
    const Shape rows3 = {Bm, Hm, n_qb, bq * Pk};
    const array v6 = reshape(pad_to(*c.values, Pq, Pk, array(0.0f), s), blocks6, s);
    const array out_of_play = logical_or(
        logical_or(reshape(shown_pad, blocks6, s), isnan(v6, s), s),
        reshape(b.hidden, {Bm, Hm, n_qb, 1, n_kb, 1}, s), s);
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
      b.dead, array(c.values ? kValues : kTwoValuedScaled),
      where(b.shown, array(kShown),
            where(two_b, array(kTwoValued), array(kValues), s), s), s);

  const auto [count, entries] = visit_entries(hidden_b, kind, s);
  const array visit = concatenate({count, off_row, off_col, entries}, -1, s);

  const array bits = shown_bits(c.shown, Pq, visit_rows(L_k, bk).bit_words, s);
  // No derivative: a transform must not differentiate the ops that build
  // the classes (a gather has none for its indices).
  return stop_gradient(
      concatenate(
          {reshape(visit, {Bm, Hm, -1}, s), reshape(bits, {Bm, Hm, -1}, s)},
          2, s),
      s);
}

array backward_mask_lists(const array& mask, const BwdListGrid& g, Stream s) {
  const ScoreClasses c = score_classes(mask, g.kind, g.dtype, g.L_q, g.L_k, s);
  const BlockClasses dkdv = block_classes(c, g.dkdv_queries, g.dkdv_keys, s);
  const bool same = g.dq_queries == g.dkdv_queries && g.dq_keys == g.dkdv_keys;
  const BlockClasses dq =
      same ? dkdv : block_classes(c, g.dq_queries, g.dq_keys, s);
  // A bool mask's blocks that are not all shown read its shown bits, an
  // additive one's its values.
  const int read = c.values ? kValues : kTwoValued;
  // One kernel's rows: a row a query block, or (by_keys) a key block.
  const auto rows = [&](const BlockClasses& b, bool by_keys) {
    // The forward's rule: a row that sees no key keeps every block.
    array skipped = logical_and(b.hidden, logical_not(b.dead, s), s);
    array kind = where(b.shown, array(kShown), array(read), s);
    if (by_keys) {
      skipped = swapaxes(skipped, 2, 3, s);
      kind = swapaxes(kind, 2, 3, s);
    }
    const auto [count, entries] = visit_entries(skipped, kind, s);
    return reshape(concatenate({count, entries}, -1, s), {c.Bm, c.Hm, -1}, s);
  };
  std::vector<array> parts = {rows(dkdv, true)};
  const BwdListRows layout = backward_list_rows(g);
  const auto padded = [](int n, int b) { return (n + b - 1) / b * b; };
  // A bool mask's shown bits past each kernel's rows: the dK/dV kernel's a
  // key over the queries, the dQ kernel's a query over the keys.
  if (layout.dkdv_bit_words > 0) {
    parts.push_back(reshape(
        shown_bits(
            swapaxes(c.shown, 2, 3, s), padded(g.L_k, g.dkdv_keys),
            layout.dkdv_bit_words, s),
        {c.Bm, c.Hm, -1}, s));
  }
  parts.push_back(rows(dq, false));
  if (layout.dq_bit_words > 0) {
    parts.push_back(reshape(
        shown_bits(
            c.shown, padded(g.L_q, g.dq_queries), layout.dq_bit_words, s),
        {c.Bm, c.Hm, -1}, s));
  }
  return stop_gradient(concatenate(parts, 2, s), s);
}

namespace {

/// Arrays built from a key array, memoised per (key, grid, stream) in a
/// small recent-first cache. An entry holds its key, so no other array can
/// take the key's id while the entry lives, and MLX does not donate
/// (overwrite) a buffer that the cache still references: a hit is always
/// the same, unchanged key.
template <typename Grid>
class Memo {
 public:
  template <typename Build>
  array get(const array& key, const Grid& g, Stream s, Build build) {
    std::lock_guard<std::mutex> guard(lock_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->key.id() == key.id() && it->grid == g && it->stream == s) {
        entries_.splice(entries_.begin(), entries_, it);
        return it->built;
      }
    }
    array built = build();
    entries_.push_front({key, g, s, built});
    if (entries_.size() > kCapacity) {
      entries_.pop_back();
    }
    return built;
  }

  /// Whether `built` is one of the entries' arrays.
  bool holds(const array& built) {
    std::lock_guard<std::mutex> guard(lock_);
    for (const Entry& e : entries_) {
      if (e.built.id() == built.id()) {
        return true;
      }
    }
    return false;
  }

 private:
  static constexpr size_t kCapacity = 4;
  struct Entry {
    array key;
    Grid grid;
    Stream stream;
    array built;
  };
  std::mutex lock_;
  std::list<Entry> entries_;
};

Memo<VisitGrid>& visits_memo() {
  static Memo<VisitGrid> memo;
  return memo;
}

} // namespace

array cached_mask_visits(const array& mask, const VisitGrid& g, Stream s) {
  // Under a transform the mask is a tracer, rebuilt each trace.
  if (mask.is_tracer()) {
    return mask_visits(mask, g, s);
  }
  return visits_memo().get(mask, g, s, [&] { return mask_visits(mask, g, s); });
}

array cached_backward_mask_lists(
    const array& visits,
    const array& mask,
    const BwdListGrid& g,
    Stream s) {
  // Inside a vjp every array reads as a tracer (MLX retains the graph), so
  // the key is the forward's classes: those the visits cache holds were
  // built from a mask outside any transform's trace.
  if (!visits_memo().holds(visits)) {
    return backward_mask_lists(mask, g, s);
  }
  static Memo<BwdListGrid> memo;
  return memo.get(visits, g, s, [&] { return backward_mask_lists(mask, g, s); });
}

} // namespace mlx_fused_attn
