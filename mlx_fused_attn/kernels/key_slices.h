// Warps that share their query rows and split each key block's keys
// (AttnTiles::key_slices): the key loop of one slice and the merge of the
// slices' softmaxes at the end, FlashDecoding's split keys within one
// threadgroup. Decode with GQA's query heads packed as rows fills one warp's
// 16 rows; with one warp of rows, every product of a threadgroup would run
// on one of a multiprocessor's four schedulers while the other warps only
// load, so each warp takes a quarter of each block's keys instead.
#pragma once

#include "mlx_fused_attn/kernels/attention_masks.h"
#include "mlx_fused_attn/kernels/attention_step.h"
#include "mlx_fused_attn/kernels/mask_visits.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

/// The pipeline's blocks from row `row0` on, as attention_step reads them:
/// blocks of T whose rows lie one after another (padded_block.h,
/// kRowStride).
template <typename T, typename Pipeline, typename KBlock, typename VBlock>
struct AttnBlockRowsFrom {
  const FA_THREAD Pipeline* pipe;
  int row0;

  FA_FUNC const FA_THREADGROUP T* k_block(int kb) const {
    return pipe->k_block(kb) + row0 * KBlock::kRowStride;
  }
  FA_FUNC const FA_THREADGROUP T* v_block(int kb) const {
    return pipe->v_block(kb) + row0 * VBlock::kRowStride;
  }
  FA_FUNC void acquire_v(int kb) const {
    pipe->acquire_v(kb);
  }
};

/// The key loop of slice `slice` of kSlices, over blocks of T: its step
/// reads rows slice * kStepKeys onwards of each block, which the masks see
/// as a block of kStepKeys keys (visit block b is their block b * kSlices +
/// slice). A share wholly past the last key (the masks' parameters' L_k)
/// is the ragged block's zero fill: no step. Every slice runs the
/// pipeline's acquires, whose barriers are the threadgroup's.
template <typename T, int kSlices, int kStepKeys>
struct AttnSlicedKeyLoop {
  template <
      typename KBlock,
      typename VBlock,
      typename Step,
      typename QOperand,
      typename Masks,
      typename Pipeline,
      typename Visits>
  static FA_FUNC void run(
      FA_THREAD Step& st,
      const FA_THREAD QOperand& q,
      const FA_THREAD Masks& masks,
      FA_THREAD Pipeline& pipe,
      Visits visits,
      int n_blocks,
      int slice,
      lane_t lane) {
    static_assert(
        KBlock::kProductWarps == 1,
        "key slices need blocks that each warp reads on its own");
    const AttnBlockRowsFrom<T, Pipeline, KBlock, VBlock> rows = {
        &pipe, slice * kStepKeys};
    for (int kb = 0; kb < n_blocks; ++kb) {
      AttnVisit visit = visits.at(kb);
      pipe.acquire(kb);
      visit.block = visit.block * kSlices + slice;
      if (visit.block * kStepKeys < masks.p->L_k) {
        attention_step<KBlock, VBlock>(st, q, masks, rows, kb, visit, lane);
      }
    }
  }
};

/// Floats of `scratch` that attention_merge_key_slices uses for a Step.
template <int kSlices, typename Step>
struct AttnKeySliceScratch {
  typedef typename Step::OTile OTile;
  FA_CONST int kFrags = OTile::kTileRows * OTile::kTileCols;
  FA_CONST int kOFloats = kFrags * OTile::frag_type::kElems;
  FA_CONST int kSlots = OTile::kRowSlots;
  /// A slice's registers, lane-major: O, then each slot's max and sum.
  FA_CONST int kSliceFloats = (kOFloats + 2 * kSlots) * kSimdWidth;
  FA_CONST int kFloats = (kSlices - 1) * kSliceFloats;
};

/// Slice 0's step `st` becomes the merge of every slice's (each a softmax
/// over its share of the keys): slices 1 onwards leave their O and row
/// statistics in `scratch`, lane by lane in register order (the slices'
/// fragments hold the same rows and columns), and slice 0 rescales each to
/// the common max. `scratch` may be the K/V stages: the first barrier
/// waits for the last block's products.
template <int kSlices, typename Step>
FA_FUNC void attention_merge_key_slices(
    FA_THREAD Step& st,
    FA_THREADGROUP float* scratch,
    int slice,
    lane_t lane) {
  typedef AttnKeySliceScratch<kSlices, Step> Scratch;
  typedef typename Step::OTile OTile;
  typedef typename OTile::frag_type F;
  FA_BARRIER();
  if (slice > 0) {
    FA_THREADGROUP float* mine =
        scratch + (slice - 1) * Scratch::kSliceFloats + lane;
    FA_UNROLL
    for (int f = 0; f < Scratch::kFrags; ++f) {
      FA_UNROLL
      for (int e = 0; e < F::kElems; ++e) {
        mine[(f * F::kElems + e) * kSimdWidth] = st.o.frags[f].v[e];
      }
    }
    FA_UNROLL
    for (int i = 0; i < Scratch::kSlots; ++i) {
      mine[(Scratch::kOFloats + 2 * i) * kSimdWidth] = st.softmax.row_max[i];
      mine[(Scratch::kOFloats + 2 * i + 1) * kSimdWidth] =
          st.softmax.row_sum[i];
    }
  }
  FA_BARRIER();
  if (slice > 0) {
    return;
  }
  for (int s = 1; s < kSlices; ++s) {
    const FA_THREADGROUP float* theirs =
        scratch + (s - 1) * Scratch::kSliceFloats + lane;
    float mine_factor[Scratch::kSlots];
    float their_factor[Scratch::kSlots];
    FA_UNROLL
    for (int i = 0; i < Scratch::kSlots; ++i) {
      const float their_max = theirs[(Scratch::kOFloats + 2 * i) * kSimdWidth];
      const float their_sum =
          theirs[(Scratch::kOFloats + 2 * i + 1) * kSimdWidth];
      const float m = FA_MAX(st.softmax.row_max[i], their_max);
      mine_factor[i] = FA_EXP2(st.softmax.row_max[i] - m);
      their_factor[i] = FA_EXP2(their_max - m);
      st.softmax.row_sum[i] =
          st.softmax.row_sum[i] * mine_factor[i] + their_sum * their_factor[i];
      st.softmax.row_max[i] = m;
    }
    OTile their_o;
    FA_UNROLL
    for (int f = 0; f < Scratch::kFrags; ++f) {
      FA_UNROLL
      for (int e = 0; e < F::kElems; ++e) {
        their_o.frags[f].v[e] = theirs[(f * F::kElems + e) * kSimdWidth];
      }
    }
    row_bin_op<MulOp>(st.o, mine_factor);
    row_bin_op<MulOp>(their_o, their_factor);
    FA_UNROLL
    for (int f = 0; f < Scratch::kFrags; ++f) {
      FA_UNROLL
      for (int e = 0; e < F::kElems; ++e) {
        st.o.frags[f].v[e] += their_o.frags[f].v[e];
      }
    }
  }
}

} // namespace fa
