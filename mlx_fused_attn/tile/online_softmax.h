// The online softmax: per-row running max and sum (fp32) over score blocks
// that arrive one at a time, with the output accumulator rescaled whenever
// the max grows. Statistics are in the exp2 domain (scores multiplied by
// log2(e)), so every exponential is one exp2.
#pragma once

#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/ops.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

template <int kSlots>
struct OnlineSoftmax {
  float row_max[kSlots]; ///< max score so far, exp2 domain
  float row_sum[kSlots]; ///< sum of exp2(score - row_max) so far
};

template <int kSlots>
FA_FUNC void
softmax_init(FA_THREAD OnlineSoftmax<kSlots>& st, float max0, float sum0) {
  FA_UNROLL
  for (int i = 0; i < kSlots; ++i) {
    st.row_max[i] = max0;
    st.row_sum[i] = sum0;
  }
}

/// Folds one block of scores into the running statistics: s becomes the
/// block's unnormalised probabilities exp2(score - max), and factor[i] the
/// rescale that the output accumulated so far needs for row slot i (the
/// old max over the new); returns whether any of this lane's rows has a new
/// max. The block's scores are s * score_scale: a kernel may hand over raw
/// products q.k and the scale into the exp2 domain (which must be > 0, as
/// max(s * c) = max(s) * c only then), so that scaling and the max
/// subtraction are one FFMA.
template <int kSlots, typename FS, int RS, int CS>
FA_FUNC bool softmax_weights(
    FA_THREAD OnlineSoftmax<kSlots>& st,
    FA_THREAD Tile<FS, RS, CS>& s,
    float score_scale,
    FA_THREAD float* factor) {
  static_assert(
      Tile<FS, RS, CS>::kRowSlots == kSlots,
      "scores and statistics must cover the same rows");
  float new_max[kSlots];
  FA_UNROLL
  for (int i = 0; i < kSlots; ++i) {
    new_max[i] = MaxOp::identity();
  }
  row_reduce<MaxOp>(new_max, s);
  float block_sum[kSlots];
  bool moved = false;
  FA_UNROLL
  for (int i = 0; i < kSlots; ++i) {
    new_max[i] = FA_MAX(st.row_max[i], new_max[i] * score_scale);
    moved = moved || new_max[i] != st.row_max[i];
    factor[i] = FA_EXP2(st.row_max[i] - new_max[i]);
    st.row_max[i] = new_max[i];
    block_sum[i] = 0.0f;
  }
  const ExpScaleSubOp exp_sub = {score_scale};
  row_bin_op(s, new_max, exp_sub);
  row_reduce<SumOp>(block_sum, s);
  FA_UNROLL
  for (int i = 0; i < kSlots; ++i) {
    st.row_sum[i] = st.row_sum[i] * factor[i] + block_sum[i];
  }
  return moved;
}

/// o *= factor where some row of the simdgroup has a new max (`moved`,
/// softmax_weights): its factor is exp2(0) = 1 otherwise. Once the running
/// maxima settle, most blocks move none (with iid scores a row's max moves
/// in block j with probability about 1 / (j + 1)), and the skipped multiply
/// is a whole output tile (64 FMUL a block for 16 rows x 128 on CUDA). The
/// test is a vote across the simdgroup, so the branch never diverges.
template <typename FO, int RO, int CO>
FA_FUNC void softmax_rescale(
    FA_THREAD Tile<FO, RO, CO>& o,
    const FA_THREAD float* factor,
    bool moved) {
  if (FA_SIMD_ANY(moved)) {
    row_bin_op<MulOp>(o, factor);
  }
}

/// softmax_weights, then the output rescaled to the new max.
template <int kSlots, typename FS, int RS, int CS, typename FO, int RO, int CO>
FA_FUNC void softmax_step(
    FA_THREAD OnlineSoftmax<kSlots>& st,
    FA_THREAD Tile<FS, RS, CS>& s,
    FA_THREAD Tile<FO, RO, CO>& o,
    float score_scale) {
  static_assert(
      Tile<FO, RO, CO>::kRowSlots == kSlots,
      "output and statistics must cover the same rows");
  float factor[kSlots];
  const bool moved = softmax_weights(st, s, score_scale, factor);
  softmax_rescale(o, factor, moved);
}

/// As above for scores already in the exp2 domain.
template <int kSlots, typename FS, int RS, int CS, typename FO, int RO, int CO>
FA_FUNC void softmax_step(
    FA_THREAD OnlineSoftmax<kSlots>& st,
    FA_THREAD Tile<FS, RS, CS>& s,
    FA_THREAD Tile<FO, RO, CO>& o) {
  softmax_step(st, s, o, 1.0f);
}

/// o /= row sum, as one reciprocal a row slot and a multiply an element: a
/// division an element is an IEEE division on CUDA (about 15 instructions
/// with its slow-path check), as many as a key block's whole step costs a
/// small tile. A row whose every score was -inf has sum 0 and becomes NaN
/// (0 * inf), as the softmax of all -inf does; over a `part` of the row's
/// keys (split keys, merged by their sums later) it stays 0 instead.
template <int kSlots, typename FO, int RO, int CO>
FA_FUNC void softmax_finalize(
    FA_THREAD Tile<FO, RO, CO>& o,
    const FA_THREAD OnlineSoftmax<kSlots>& st,
    bool part = false) {
  float inv_sum[kSlots];
  FA_UNROLL
  for (int i = 0; i < kSlots; ++i) {
    inv_sum[i] = part && st.row_sum[i] == 0.0f ? 0.0f : 1.0f / st.row_sum[i];
  }
  row_bin_op<MulOp>(o, inv_sum);
}

} // namespace fa
