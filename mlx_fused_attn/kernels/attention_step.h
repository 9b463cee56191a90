// One warp's step of attention over one key block, shared by every kernel
// body (attention.h, short_attention.h, na_attention.h):
//
//   S = Q K^T;  mask;  online softmax (P = exp2(S - max), O rescaled);
//   O += P V
//
// and the epilogue, O / row sum; and, for schedules that let steps overlap
// (the producer warpgroup's, kv_tma_ring.h), the same step cut in three:
// each block's S issued with the previous block's P V, and its mask and
// softmax run while that P V is on the tensor cores. The K and V blocks
// are `KBlock` and `VBlock` (a Target's KVBlock: padded_block.h,
// swizzled_block.h), which own the products; the masks are the kernel's
// (attention_masks.h, or the neighborhood's), and the pipeline
// (tile/kv_pipeline.h) says where the blocks are and when V has landed.
#pragma once

#include "mlx_fused_attn/kernels/attention_masks.h"
#include "mlx_fused_attn/kernels/mask_visits.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/online_softmax.h"
#include "mlx_fused_attn/tile/ops.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

/// A warp's registers over a run of key blocks: kWarpRows query rows against
/// kBK keys a block, an output of kVCols columns.
template <typename Target, typename T, int kWarpRows, int kBK, int kVCols>
struct AttnStep {
  typedef typename Target::template FragA<T> FragA;
  typedef typename Target::FragC FragC;
  static_assert(
      kWarpRows % FragA::kRows == 0 && kWarpRows % FragC::kRows == 0,
      "a warp's query rows must be whole fragments");
  static_assert(
      kBK % FragA::kCols == 0 && kBK % FragC::kCols == 0,
      "the key block must be whole fragments");
  static_assert(kVCols % FragC::kCols == 0, "O must be whole fragments");

  typedef Tile<FragC, kWarpRows / FragC::kRows, kBK / FragC::kCols> STile;
  typedef Tile<FragC, kWarpRows / FragC::kRows, kVCols / FragC::kCols> OTile;

  STile s; ///< scores
  Tile<FragA, kWarpRows / FragA::kRows, kBK / FragA::kCols> p; ///< weights
  OTile o; ///< output
  OnlineSoftmax<STile::kRowSlots> softmax;
};

/// What masks that read nothing ahead of a block's product prefetch.
struct NoMaskPrefetch {};

/// O = 0, and the softmax starts empty, or from a sink: one more logit,
/// raw, not scaled (MLX puts it beside the scaled scores), which starts the
/// max and adds exp2(sink - max) to the sum.
template <typename Step, typename T>
FA_FUNC void
attention_step_begin(FA_THREAD Step& st, bool has_sink, T sink) {
  if (has_sink) {
    softmax_init(st.softmax, static_cast<float>(sink) * FA_LOG2E, 1.0f);
  } else {
    softmax_init(st.softmax, -FA_FLT_MAX, 0.0f);
  }
  tile_fill(st.o, 0.0f);
}

/// One key block, kb of the pipeline: `q` is the warp's Q operand (what
/// KBlock::mma_abt reads); `visit` is what the masks know of the block (its
/// index, or an AttnVisit that the caller read before the pipeline's wait);
/// `masks.start(s, visit, lane)` sets the scores' start (zero, or a mask
/// that the product's accumulator adds), `masks.apply(s, pre, visit, lane)`
/// masks the scores and returns the scale left for the softmax to apply;
/// `pre`, which masks.prefetch filled before the product, is what the masks
/// read from memory for the block (Masks::Prefetch<STile>::type;
/// NoMaskPrefetch).
template <
    typename KBlock,
    typename VBlock,
    typename Step,
    typename QOperand,
    typename Masks,
    typename Pipeline,
    typename Visit>
FA_FUNC void attention_step(
    FA_THREAD Step& st,
    const FA_THREAD QOperand& q,
    const FA_THREAD Masks& masks,
    const FA_THREAD Pipeline& pipe,
    int kb,
    Visit visit,
    lane_t lane) {
  // Issued first, so that the loads are in flight during the product.
  typename Masks::template Prefetch<typename Step::STile>::type pre;
  masks.prefetch(pre, visit, lane);

  // ------------------------------------------------------- S = Q K^T
  masks.start(st.s, visit, lane);
  KBlock::mma_abt(st.s, q, pipe.k_block(kb), lane);

  // ------------------------------------------------------------ mask
  const float score_scale = masks.apply(st.s, pre, visit, lane);

  // --------------------------------------------------------- softmax
  softmax_step(st.softmax, st.s, st.o, score_scale);
  tile_to_operand(st.p, st.s);

  // ------------------------------------------------------------ P V
  pipe.acquire_v(kb);
  VBlock::mma_ab(st.o, st.p, pipe.v_block(kb), lane);
}

/// FlashAttention-3's overlap within a warpgroup, for blocks whose
/// products are issued and waited for apart (swizzled_block.h) and a
/// schedule that lets the step say when a block is done (kv_tma_ring.h):
/// block kb's S and block kb - 1's P V run on the tensor cores together,
/// and kb's mask and softmax run under P V. Three parts: the first block's
/// S and weights, each later block with the previous one's P V, and the
/// last block's P V.
template <
    typename KBlock,
    typename Step,
    typename QOperand,
    typename Masks,
    typename Pipeline>
FA_FUNC void attention_step_first(
    FA_THREAD Step& st,
    const FA_THREAD QOperand& q,
    const FA_THREAD Masks& masks,
    const FA_THREAD Pipeline& pipe,
    AttnVisit visit,
    lane_t lane) {
  typename Masks::template Prefetch<typename Step::STile>::type pre;
  masks.prefetch(pre, visit, lane);
  masks.start(st.s, visit, lane);
  pipe.take_turn();
  KBlock::issue_mma_abt(st.s, q, pipe.k_block(0));
  pipe.pass_turn(false);
  KBlock::template retire<0>(st.s);
  const float score_scale = masks.apply(st.s, pre, visit, lane);
  // O is still zero: nothing to rescale.
  float factor[Step::STile::kRowSlots];
  softmax_weights(st.softmax, st.s, score_scale, factor);
  tile_to_operand(st.p, st.s);
}

template <
    typename KBlock,
    typename VBlock,
    typename Step,
    typename QOperand,
    typename Masks,
    typename Pipeline>
FA_FUNC void attention_step_overlapped(
    FA_THREAD Step& st,
    const FA_THREAD QOperand& q,
    const FA_THREAD Masks& masks,
    const FA_THREAD Pipeline& pipe,
    int kb,
    AttnVisit visit,
    lane_t lane) {
  typename Masks::template Prefetch<typename Step::STile>::type pre;
  masks.prefetch(pre, visit, lane);

  // --------------------------------- S = Q K_kb^T and O += P_kb-1 V_kb-1
  masks.start(st.s, visit, lane);
  pipe.take_turn();
  KBlock::issue_mma_abt(st.s, q, pipe.k_block(kb));
  pipe.acquire_v(kb - 1);
  VBlock::issue_mma_ab(st.o, st.p, pipe.v_block(kb - 1));
  pipe.pass_turn(false);

  // ---------------------------------- mask and softmax under P V
  KBlock::template retire<1>(st.s); // committed first
  const float score_scale = masks.apply(st.s, pre, visit, lane);
  float factor[Step::STile::kRowSlots];
  const bool moved =
      softmax_weights(st.softmax, st.s, score_scale, factor);

  // ---------------------- P V has landed: rescale O, the next P
  // P V's wait is in each arm of the rescale's branch: in the softmax's
  // basic block ptxas (CUDA 13.0) would schedule it ahead of the softmax
  // (docs/gpu_kernels.md).
  if (FA_SIMD_ANY(moved)) {
    VBlock::template retire<0, 0>(st.o);
    row_bin_op<MulOp>(st.o, factor);
  } else {
    VBlock::template retire<0, 1>(st.o);
  }
  VBlock::keep_until_done(st.p);
  pipe.release(kb - 1);
  tile_to_operand(st.p, st.s);
}

template <typename VBlock, typename Step, typename Pipeline>
FA_FUNC void attention_step_last(
    FA_THREAD Step& st,
    const FA_THREAD Pipeline& pipe,
    int kb) {
  pipe.acquire_v(kb);
  pipe.take_turn();
  VBlock::issue_mma_ab(st.o, st.p, pipe.v_block(kb));
  pipe.pass_turn(true);
  VBlock::template retire<0>(st.o);
  VBlock::keep_until_done(st.p);
  pipe.release(kb);
}

/// The key loop over a pipeline's n_blocks blocks: a step a block, or, where
/// the schedule lets the steps overlap (Pipeline::kOverlapSteps), the three
/// parts above. Each visit is read before the pipeline's wait, which its
/// latency then overlaps. The pipeline is the loop's to change: a schedule
/// may keep state across its acquires (KVRegisterStaged's registers). A
/// warp the schedule lets skip the steps (skips_steps) runs the acquires
/// alone; the overlapped loop's schedule (kv_tma_ring.h) never does.
template <bool kOverlapSteps>
struct AttnKeyLoop {
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
      lane_t lane) {
    for (int kb = 0; kb < n_blocks; ++kb) {
      const AttnVisit visit = visits.at(kb);
      pipe.acquire(kb);
      if (!pipe.skips_steps()) {
        attention_step<KBlock, VBlock>(st, q, masks, pipe, kb, visit, lane);
      }
    }
  }
};

template <>
struct AttnKeyLoop<true> {
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
      lane_t lane) {
    const AttnVisit first = visits.at(0);
    pipe.acquire(0);
    attention_step_first<KBlock>(st, q, masks, pipe, first, lane);
    for (int kb = 1; kb < n_blocks; ++kb) {
      const AttnVisit visit = visits.at(kb);
      pipe.acquire(kb);
      attention_step_overlapped<KBlock, VBlock>(
          st, q, masks, pipe, kb, visit, lane);
    }
    attention_step_last<VBlock>(st, pipe, n_blocks - 1);
  }
};

/// O / row sum, one reciprocal a row (online_softmax.h); `part`: the
/// blocks were one split of the keys (split_keys.h).
template <typename Step>
FA_FUNC void attention_step_end(FA_THREAD Step& st, bool part = false) {
  softmax_finalize(st.o, st.softmax, part);
}

/// The rows' log-sum-exp, natural log, into dst (one float a row, rows <
/// rows_left), for the backward (backward_params.h): -inf for a row whose
/// every score was masked and that has no sink (its max is the masked
/// score itself).
template <typename Step>
FA_FUNC void attention_step_store_lse(
    const FA_THREAD Step& st,
    FA_DEVICE float* dst,
    int rows_left,
    lane_t lane) {
  float lse[Step::STile::kRowSlots];
  FA_UNROLL
  for (int i = 0; i < Step::STile::kRowSlots; ++i) {
    const float m = st.softmax.row_max[i];
    lse[i] = m == MaskedScore::value
        ? -FA_INFINITY
        : (m + FA_LOG2(st.softmax.row_sum[i])) * FA_LN2;
  }
  tile_store_rows<typename Step::STile>(dst, lse, rows_left, lane);
}

} // namespace fa
