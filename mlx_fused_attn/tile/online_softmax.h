// The online softmax: per-row running max and sum (fp32) over score blocks
// that arrive one at a time, with the output accumulator rescaled whenever
// the max grows. Scores are in the exp2 domain (already multiplied by
// log2(e)), so every exponential is one exp2.
#pragma once

#include "mlx_fused_attn/tile/backend.h"
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
/// block's unnormalised probabilities exp2(s - max) and o, the output
/// accumulated so far, is rescaled to the new max.
template <int kSlots, typename FS, int RS, int CS, typename FO, int RO, int CO>
FA_FUNC void softmax_step(
    FA_THREAD OnlineSoftmax<kSlots>& st,
    FA_THREAD Tile<FS, RS, CS>& s,
    FA_THREAD Tile<FO, RO, CO>& o) {
  static_assert(
      Tile<FS, RS, CS>::kRowSlots == kSlots &&
          Tile<FO, RO, CO>::kRowSlots == kSlots,
      "scores, output and statistics must cover the same rows");
  float new_max[kSlots];
  FA_UNROLL
  for (int i = 0; i < kSlots; ++i) {
    new_max[i] = st.row_max[i];
  }
  row_reduce<MaxOp>(new_max, s);
  row_bin_op<ExpSubOp>(s, new_max);

  float factor[kSlots];
  float block_sum[kSlots];
  FA_UNROLL
  for (int i = 0; i < kSlots; ++i) {
    factor[i] = FA_EXP2(st.row_max[i] - new_max[i]);
    st.row_max[i] = new_max[i];
    block_sum[i] = 0.0f;
  }
  row_reduce<SumOp>(block_sum, s);
  FA_UNROLL
  for (int i = 0; i < kSlots; ++i) {
    st.row_sum[i] = st.row_sum[i] * factor[i] + block_sum[i];
  }
  row_bin_op<MulOp>(o, factor);
}

/// o /= row sum. A row whose every score was -inf has sum 0 and becomes NaN,
/// as the softmax of all -inf does.
template <int kSlots, typename FO, int RO, int CO>
FA_FUNC void softmax_finalize(
    FA_THREAD Tile<FO, RO, CO>& o,
    const FA_THREAD OnlineSoftmax<kSlots>& st) {
  row_bin_op<DivOp>(o, st.row_sum);
}

} // namespace fa
