// Split keys (the FlashDecoding pattern): when a call's query blocks fill
// less than a wave of the GPU, n_splits threadgroups share each query
// block's key blocks. Each writes its rows' output over its keys, normalised
// (fp32), and their log-sum-exp; the combine step merges the splits:
//
//   O = sum_i exp2(lse_i - m) O_i / sum_i exp2(lse_i - m),  m = max_i lse_i
//
// which is exact: exp2(lse_i) is split i's softmax denominator, so each O_i
// gets back its share of the whole row's. A split that saw no key has lse
// -inf and O_i = 0, and adds nothing. Scores are in the exp2 domain.
//
// The partials are [n_splits, B, H_q, L_q] rows (O_i: of D_v floats), H_q
// and L_q as the kernel's parameters say (packed GQA included).
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/backend.h"

namespace fa {

/// Where one threadgroup's split of a query block goes: split `index` of
/// `count` (count 1: no split, the output itself is written).
struct AttnSplit {
  FA_DEVICE float* o; ///< the partial outputs (count > 1)
  FA_DEVICE float* lse; ///< the partial log-sum-exps, exp2 domain
  int index;
  int count;
};

/// The key blocks first .. end - 1 of a query block's n_blocks that split
/// `index` of `count` visits: equal runs, the last one shorter, and empty
/// for splits past the blocks a causal query block sees.
struct AttnSplitBlocks {
  int first;
  int end;
};

FA_FUNC AttnSplitBlocks split_key_blocks(int n_blocks, int index, int count) {
  const int per_split = (n_blocks + count - 1) / count;
  const int first = index * per_split;
  const int end = first + per_split < n_blocks ? first + per_split : n_blocks;
  const AttnSplitBlocks blocks = {first, end > first ? end : first};
  return blocks;
}

/// The partials' row of (batch, head, query row) in split `index`.
FA_FUNC stride_t split_row(
    const FA_CONSTANT AttnParams& p,
    int index,
    int batch,
    int head,
    int row) {
  return ((stride_t(index) * p.B + batch) * p.H_q + head) * p.L_q + row;
}

/// One element of the output, `inner` = row * D_v + column of (batch,
/// head), merged from the n_splits partials; nothing past the last row
/// (a grid of whole threadgroups).
template <typename T>
FA_FUNC void split_combine_element(
    const FA_DEVICE float* o_part,
    const FA_DEVICE float* lse,
    FA_DEVICE T* out,
    const FA_CONSTANT AttnParams& p,
    int n_splits,
    int inner,
    int head,
    int batch) {
  if (inner >= p.L_q * p.D_v) {
    return;
  }
  const int row = inner / p.D_v;
  const int col = inner % p.D_v;
  float lse_max = -FA_INFINITY;
  for (int i = 0; i < n_splits; ++i) {
    lse_max = FA_MAX(lse_max, lse[split_row(p, i, batch, head, row)]);
  }
  float weight_sum = 0.0f;
  float acc = 0.0f;
  for (int i = 0; i < n_splits; ++i) {
    const stride_t r = split_row(p, i, batch, head, row);
    // A NaN log-sum-exp (NaN in q) makes its weight, and the row, NaN.
    const float weight = FA_EXP2(lse[r] - lse_max);
    weight_sum += weight;
    acc += weight * o_part[r * p.D_v + col];
  }
  out[batch * p.o_strides[0] + head * p.o_strides[1] + row * p.o_strides[2] +
      col] = static_cast<T>(acc / weight_sum);
}

} // namespace fa
