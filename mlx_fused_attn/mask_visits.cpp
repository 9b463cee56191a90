#include "mlx_fused_attn/mask_visits.h"

#include <cfloat>
#include <list>
#include <mutex>

#include "mlx/ops.h"
#include "mlx_fused_attn/launch_plan.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

/// x [..., n, m] padded with `value` to [..., rows, cols].
array pad_to(const array& x, int rows, int cols, bool value, Stream s) {
  const int nd = static_cast<int>(x.ndim());
  return pad(
      x, {nd - 2, nd - 1}, {0, 0}, {rows - x.shape(-2), cols - x.shape(-1)},
      array(value), "constant", s);
}

/// all (or any) over each bq x bk block of x [Bm, Hm, n_qb * bq, n_kb * bk].
array block_reduce(const array& x, int bq, int bk, bool every, Stream s) {
  const Shape blocks = {
      x.shape(0), x.shape(1), x.shape(2) / bq, bq, x.shape(3) / bk, bk};
  const array b = reshape(x, blocks, s);
  return every ? all(b, {3, 5}, false, s) : any(b, {3, 5}, false, s);
}

} // namespace

array mask_visits(const array& mask, const VisitGrid& g, Stream s) {
  const int L_q = g.L_q, L_k = g.L_k, bq = g.bq, bk = g.bk;
  Shape shape4(4 - mask.ndim(), 1);
  shape4.insert(shape4.end(), mask.shape().begin(), mask.shape().end());
  const Shape rows = {shape4[0], shape4[1], L_q, L_k};
  array m = broadcast_to(reshape(mask, shape4, s), rows, s);
  // A score is hidden where the kernel would make it the masked score or
  // -inf (attention_masks.h), shown where the mask leaves it unchanged.
  array hidden = logical_not(m, s), shown = m;
  if (g.kind == MaskKind::Additive) {
    const array m2 = multiply(astype(astype(m, g.dtype, s), float32, s),
                              array(kLog2e), s);
    hidden = less(m2, array(-0.5f * FLT_MAX), s);
    shown = equal(m2, array(0.0f), s);
  }
  // A row that sees no key keeps every block, for MLX's uniform softmax.
  const int n_qb = (L_q + bq - 1) / bq, n_kb = (L_k + bk - 1) / bk;
  const array dead_rows = all(hidden, -1, true, s);
  const array dead = expand_dims(
      block_reduce(pad_to(dead_rows, n_qb * bq, 1, false, s), bq, 1, false, s),
      -1, s);
  const array hidden_b = logical_and(
      block_reduce(pad_to(hidden, n_qb * bq, n_kb * bk, true, s), bq, bk,
                   true, s),
      logical_not(squeeze(dead, -1, s), s), s);
  const array mixed_b = logical_or(
      logical_not(block_reduce(pad_to(shown, n_qb * bq, n_kb * bk, true, s),
                               bq, bk, true, s), s),
      squeeze(dead, -1, s), s);
  // Visited blocks first, in order: hidden ones sort past n_kb.
  const array kb = arange(n_kb, int32, s);
  const array order = sort(
      where(hidden_b, add(kb, array(n_kb), s), kb, s), -1, s);
  const array block = remainder(order, array(n_kb), s);
  const array entries = add(
      multiply(block, array(2), s),
      astype(take_along_axis(mixed_b, block, -1, s), int32, s), s);
  const array count = astype(
      sum(logical_not(hidden_b, s), -1, true, s), int32, s);
  return concatenate({count, entries}, -1, s);
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
