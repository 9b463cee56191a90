// Split keys (the FlashDecoding pattern): when a call's query blocks fill
// less than a wave of the GPU, n_splits threadgroups share each query
// block's key blocks. Each writes its rows' output over its keys,
// normalised (fp32), with their softmax statistics, max m_i and sum l_i
// (exp2 domain); the combine step merges the splits exactly:
//
//   O = sum_i w_i O_i / sum_i w_i,   w_i = l_i exp2(m_i - max_j m_j)
//
// since w_i is split i's share of the whole row's softmax denominator. A
// split that saw no key has l_i = 0 and adds nothing. Not the log-sum-exp
// m_i + log2(l_i): a masked score is finite (MaskedScore) and so large that
// log2(l_i) is lost beside it, and with it how many keys a fully masked
// split averaged.
//
// The partials are [n_splits, B, H_q, L_q] rows (O_i of D_v floats; the
// statistics all the maxima, then all the sums), H_q and L_q as the
// kernel's parameters say (packed GQA included).
#pragma once

#include "mlx_fused_attn/kernels/attention_masks.h"
#include "mlx_fused_attn/kernels/split_combine_form.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/platform.h"

namespace fa {

/// Which split of a query block's keys a threadgroup visits: split `index`
/// of `count` (count 1: no split, the output itself is written).
struct AttnSplit {
  int index;
  int count;
};

/// The key blocks first .. end - 1 of a query block's n_blocks that split
/// `index` of `count` visits: equal runs, the last one shorter, and none
/// (first = end = n_blocks) for splits past the blocks a causal query block
/// sees.
struct AttnSplitBlocks {
  int first;
  int end;
};

FA_FUNC AttnSplitBlocks split_key_blocks(int n_blocks, int index, int count) {
  const int per_split = (n_blocks + count - 1) / count;
  const int first = index * per_split < n_blocks ? index * per_split : n_blocks;
  const int end = first + per_split < n_blocks ? first + per_split : n_blocks;
  const AttnSplitBlocks blocks = {first, end};
  return blocks;
}

/// The partials' row of (batch, head, query row) in split `index`; with
/// index n_splits, the number of rows (where the sums start).
FA_FUNC stride_t split_row(
    const FA_CONSTANT AttnParams& p,
    int index,
    int batch,
    int head,
    int row) {
  return ((stride_t(index) * p.B + batch) * p.H_q + head) * p.L_q + row;
}

/// The largest of the n_splits maxima of (batch, head, row): the exponent
/// that the splits' weights are taken against.
FA_FUNC float split_max(
    const FA_DEVICE float* stats,
    const FA_CONSTANT AttnParams& p,
    int n_splits,
    int row,
    int head,
    int batch) {
  float max_all = -FA_INFINITY;
  for (int i = 0; i < n_splits; ++i) {
    max_all = FA_MAX(max_all, stats[split_row(p, i, batch, head, row)]);
  }
  return max_all;
}

/// A split's weight w_i from its sum and max, against the maxima's
/// largest, max_all.
FA_FUNC float split_weight_of(float sum, float max, float max_all) {
  // NaN in a split's scores makes its sum, and the row, NaN.
  return sum * FA_EXP2(max - max_all);
}

/// Split `r`'s weight w_i against the maxima's largest, max_all (the
/// partials' row r; the sums from row `sums`).
FA_FUNC float split_weight(
    const FA_DEVICE float* stats,
    stride_t sums,
    stride_t r,
    float max_all) {
  const float sum = stats[sums + r];
  return split_weight_of(sum, stats[r], max_all);
}

/// Which elements of (batch, head)'s output split_combine_elements merges:
/// element j at inner + j * stride (inner = row * D_v + column), those at
/// or past `end` skipped.
struct SplitElems {
  int inner;
  int stride;
  int end;
  int head;
  int batch;
};

/// kElems elements of the output merged from the n_splits partials, each
/// split's loads for all of them issued together (a thread that merges
/// several elements waits on one chain of loads, not kElems).
template <int kElems, typename T>
FA_FUNC void split_combine_elements(
    const FA_DEVICE float* o_part,
    const FA_DEVICE float* stats,
    FA_DEVICE T* out,
    const FA_CONSTANT AttnParams& p,
    int n_splits,
    SplitElems e) {
  const stride_t sums = split_row(p, n_splits, 0, 0, 0);
  int row[kElems];
  float max_all[kElems];
  float weight_sum[kElems];
  float acc[kElems];
  FA_UNROLL
  for (int j = 0; j < kElems; ++j) {
    const int inner = e.inner + j * e.stride;
    // A skipped element reads the last row's partials, which its caller's
    // splits wrote.
    row[j] = (inner < e.end ? inner : e.end - 1) / p.D_v;
    max_all[j] = -FA_INFINITY;
    weight_sum[j] = 0.0f;
    acc[j] = 0.0f;
  }
  for (int i = 0; i < n_splits; ++i) {
    FA_UNROLL
    for (int j = 0; j < kElems; ++j) {
      max_all[j] = FA_MAX(
          max_all[j], stats[split_row(p, i, e.batch, e.head, row[j])]);
    }
  }
  for (int i = 0; i < n_splits; ++i) {
    FA_UNROLL
    for (int j = 0; j < kElems; ++j) {
      const stride_t r = split_row(p, i, e.batch, e.head, row[j]);
      const float weight = split_weight(stats, sums, r, max_all[j]);
      weight_sum[j] += weight;
      acc[j] += weight * o_part[r * p.D_v + (e.inner + j * e.stride) % p.D_v];
    }
  }
  FA_UNROLL
  for (int j = 0; j < kElems; ++j) {
    const int inner = e.inner + j * e.stride;
    if (inner < e.end) {
      // All sums 0 (every score -inf): 0 / 0, NaN, as the softmax gives.
      out[e.batch * p.o_strides[0] + e.head * p.o_strides[1] +
          row[j] * p.o_strides[2] + inner % p.D_v] =
          static_cast<T>(acc[j] / weight_sum[j]);
    }
  }
}

/// One element of the output, `inner` = row * D_v + column of (batch,
/// head), merged from the n_splits partials; nothing past the last row
/// (a grid of whole threadgroups). SplitCombineForm::OneElement: its own
/// loop, not split_combine_elements<1>, which compiles to 14% more
/// instructions a thread at 4 splits on sm_90a (two more integer divisions
/// for the column, the split rows' offsets recomputed at each split), which
/// a combine of many rows over few splits pays in time.
template <typename T>
FA_FUNC void split_combine_element(
    const FA_DEVICE float* o_part,
    const FA_DEVICE float* stats,
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
  const stride_t sums = split_row(p, n_splits, 0, 0, 0);
  const float max_all = split_max(stats, p, n_splits, row, head, batch);
  float weight_sum = 0.0f;
  float acc = 0.0f;
  for (int i = 0; i < n_splits; ++i) {
    const stride_t r = split_row(p, i, batch, head, row);
    const float weight = split_weight(stats, sums, r, max_all);
    weight_sum += weight;
    acc += weight * o_part[r * p.D_v + col];
  }
  // All sums 0 (every score -inf): 0 / 0, NaN, as the softmax gives.
  out[batch * p.o_strides[0] + head * p.o_strides[1] + row * p.o_strides[2] +
      col] = static_cast<T>(acc / weight_sum);
}

/// The same element through split_combine_elements<1>
/// (SplitCombineForm::Grouped): sm_90a issues the loads of several splits
/// before using them, which a small combine grid, waiting on memory more
/// than on its instructions, gains from (decode over 16 or 32 splits).
template <typename T>
FA_FUNC void split_combine_element_grouped(
    const FA_DEVICE float* o_part,
    const FA_DEVICE float* stats,
    FA_DEVICE T* out,
    const FA_CONSTANT AttnParams& p,
    int n_splits,
    int inner,
    int head,
    int batch) {
  if (inner >= p.L_q * p.D_v) {
    return;
  }
  const SplitElems e = {inner, 0, p.L_q * p.D_v, head, batch};
  split_combine_elements<1>(o_part, stats, out, p, n_splits, e);
}

/// The element in the form kForm (split_combine_form.h): each CUDA combine
/// kernel instance runs one.
template <typename T, SplitCombineForm kForm>
FA_FUNC void split_combine_element_in(
    const FA_DEVICE float* o_part,
    const FA_DEVICE float* stats,
    FA_DEVICE T* out,
    const FA_CONSTANT AttnParams& p,
    int n_splits,
    int inner,
    int head,
    int batch) {
  if constexpr (kForm == SplitCombineForm::Grouped) {
    split_combine_element_grouped(
        o_part, stats, out, p, n_splits, inner, head, batch);
  } else {
    split_combine_element(o_part, stats, out, p, n_splits, inner, head, batch);
  }
}

/// SplitCombineForm::RowThreadgroup's shape: simdgroups a row, the row's
/// columns each lane merges at once, the splits each simdgroup loads before
/// it uses any (a thread waits on n_splits / (warps * batch) rounds of
/// loads), and the floats of threadgroup memory split_combine_row takes
/// (each simdgroup's sums of kRowCombineCols columns, then its weight sum).
/// An enum: Metal takes program-scope constants only in `constant`.
enum {
  kRowCombineWarps = 8,
  kRowCombineLaneCols = 4,
  kRowCombineBatch = 4,
  kRowCombineCols = kRowCombineLaneCols * kSimdWidth,
  kRowCombineScratch = kRowCombineWarps * (kRowCombineCols + 1)
};

/// Which output row split_combine_row merges.
struct SplitRow {
  int row;
  int head;
  int batch;
};

/// The largest of the n_splits maxima of `at`, each lane of a simdgroup
/// loading every kSimdWidth-th: one round of loads for up to 32 splits.
FA_FUNC float split_max_across_lanes(
    const FA_DEVICE float* stats,
    const FA_CONSTANT AttnParams& p,
    int n_splits,
    SplitRow at,
    int lane) {
  float max_all = -FA_INFINITY;
  for (int i = lane; i < n_splits; i += kSimdWidth) {
    max_all =
        FA_MAX(max_all, stats[split_row(p, i, at.batch, at.head, at.row)]);
  }
  for (int mask = kSimdWidth / 2; mask > 0; mask /= 2) {
    max_all = FA_MAX(max_all, FA_SHUFFLE_XOR(max_all, mask));
  }
  return max_all;
}

/// Row `at` merged by one threadgroup of kRowCombineWarps simdgroups
/// (SplitCombineForm::RowThreadgroup), `tid` its thread: simdgroup w takes
/// splits w, w + kRowCombineWarps, ... and its lanes the row's columns,
/// kRowCombineCols at a time; the simdgroups' sums meet in `scratch`
/// (kRowCombineScratch floats). Decode merges a few rows over many splits,
/// where a thread an element would wait on every split's loads in turn.
template <typename T>
FA_FUNC void split_combine_row(
    const FA_DEVICE float* o_part,
    const FA_DEVICE float* stats,
    FA_DEVICE T* out,
    const FA_CONSTANT AttnParams& p,
    int n_splits,
    SplitRow at,
    FA_THREADGROUP float* scratch,
    int tid) {
  const int warp = tid / kSimdWidth;
  const int lane = tid % kSimdWidth;
  const stride_t sums = split_row(p, n_splits, 0, 0, 0);
  const float max_all = split_max_across_lanes(stats, p, n_splits, at, lane);
  FA_THREADGROUP float* weight_sums =
      scratch + kRowCombineWarps * kRowCombineCols;
  for (int c0 = 0; c0 < p.D_v; c0 += kRowCombineCols) {
    float weight_sum = 0.0f;
    float acc[kRowCombineLaneCols];
    FA_UNROLL
    for (int j = 0; j < kRowCombineLaneCols; ++j) {
      acc[j] = 0.0f;
    }
    for (int i0 = warp; i0 < n_splits;
         i0 += kRowCombineWarps * kRowCombineBatch) {
      // The batch's loads first, all in flight at once; a split past the
      // last reads split i0 again, at weight 0, so that no branch parts
      // them.
      float split_max_of[kRowCombineBatch];
      float split_sum_of[kRowCombineBatch];
      float part[kRowCombineBatch][kRowCombineLaneCols];
      FA_UNROLL
      for (int b = 0; b < kRowCombineBatch; ++b) {
        const int i = i0 + b * kRowCombineWarps;
        const stride_t r =
            split_row(p, i < n_splits ? i : i0, at.batch, at.head, at.row);
        split_max_of[b] = stats[r];
        split_sum_of[b] = i < n_splits ? stats[sums + r] : 0.0f;
        FA_UNROLL
        for (int j = 0; j < kRowCombineLaneCols; ++j) {
          const int col = c0 + j * kSimdWidth + lane;
          part[b][j] = col < p.D_v ? o_part[r * p.D_v + col] : 0.0f;
        }
      }
      FA_UNROLL
      for (int b = 0; b < kRowCombineBatch; ++b) {
        const float weight =
            split_weight_of(split_sum_of[b], split_max_of[b], max_all);
        weight_sum += weight;
        FA_UNROLL
        for (int j = 0; j < kRowCombineLaneCols; ++j) {
          acc[j] += weight * part[b][j];
        }
      }
    }
    FA_UNROLL
    for (int j = 0; j < kRowCombineLaneCols; ++j) {
      scratch[warp * kRowCombineCols + j * kSimdWidth + lane] = acc[j];
    }
    if (lane == 0) {
      weight_sums[warp] = weight_sum;
    }
    FA_BARRIER();
    const int col = c0 + tid;
    if (tid < kRowCombineCols && col < p.D_v) {
      float total = 0.0f;
      float total_weight = 0.0f;
      FA_UNROLL
      for (int w = 0; w < kRowCombineWarps; ++w) {
        total += scratch[w * kRowCombineCols + tid];
        total_weight += weight_sums[w];
      }
      // All sums 0 (every score -inf): 0 / 0, NaN, as the softmax gives.
      out[at.batch * p.o_strides[0] + at.head * p.o_strides[1] +
          at.row * p.o_strides[2] + col] =
          static_cast<T>(total / total_weight);
    }
    FA_BARRIER();
  }
}

/// The log-sum-exp (natural log) of query row `row` of (batch, head),
/// merged from the n_splits statistics into lse, fp32 [B, H_q, L_q]:
/// log(sum_i l_i 2^m_i), -inf where every split's max is the masked score
/// (every key masked, no sink), as attention_step_store_lse writes it
/// unsplit.
FA_FUNC void split_combine_lse(
    const FA_DEVICE float* stats,
    FA_DEVICE float* lse,
    const FA_CONSTANT AttnParams& p,
    int n_splits,
    int row,
    int head,
    int batch) {
  const stride_t sums = split_row(p, n_splits, 0, 0, 0);
  const float max_all = split_max(stats, p, n_splits, row, head, batch);
  float weight_sum = 0.0f;
  for (int i = 0; i < n_splits; ++i) {
    weight_sum += split_weight(
        stats, sums, split_row(p, i, batch, head, row), max_all);
  }
  lse[(stride_t(batch) * p.H_q + head) * p.L_q + row] =
      max_all == MaskedScore::value
      ? -FA_INFINITY
      : (max_all + FA_LOG2(weight_sum)) * FA_LN2;
}

} // namespace fa
