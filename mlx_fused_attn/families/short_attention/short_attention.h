// The short-sequence attention kernel body, written once over the tile ops:
//
//   O = softmax(scale * Q K^T + mask) V     for several (batch, head) at once
//
// For L_q, L_k <= kSeq (at most 64). One threadgroup owns kProblems
// consecutive (batch, head) sequences. All its threads first copy Q, K and V
// of every one of them whole into threadgroup memory (16-byte copies on
// CUDA, cp.async), so each threadgroup has all its bytes in flight at once;
// then each simdgroup (warp) takes (sequence, row group) pairs in turn: a
// fragment row of queries against all keys: one attention_step
// (attention_step.h) over the whole row, and the store. Threadgroups do not wait on each other, so many of them per
// core keep the memory busy while others compute.
//
// Semantics are the general kernel's (attention.h, attention_masks.h):
// masked scores become MaskedScore (a row masked everywhere averages V, or
// is 0 beside a sink), keys past L_k get -inf, sinks are raw logits beside
// the scaled scores, and an additive row of all -inf is NaN.
//
// `Target` supplies the fragments by role and the loader of its padded
// blocks (padded_block.h); the entry point of each backend picks it and
// fills the features. The mask arrives as bytes: it
// holds bool or T, as the features say.
#pragma once

#include "mlx_fused_attn/kernels/attention_args.h"
#include "mlx_fused_attn/kernels/attention_masks.h"
#include "mlx_fused_attn/kernels/attention_step.h"
#include "mlx_fused_attn/families/short_attention/short_attention_features.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/kv_pipeline.h"
#include "mlx_fused_attn/tile/padded_block.h"
#include "mlx_fused_attn/tile/q_in_registers.h"
#include "mlx_fused_attn/tile/platform.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

/// Compile-time shape of one short kernel instance; the sizes come from the
/// instantiation list, which static_asserts them against
/// choose_short_attention_tiles.
template <
    typename T,
    int kHeadDim_,
    int kSeq_,
    int kWarpRows_,
    int kWarps_,
    int kProblems_>
struct ShortShape {
  typedef T elem_type;
  FA_CONST int kHeadDim = kHeadDim_;
  FA_CONST int kSeq = kSeq_;
  FA_CONST int kWarpRows = kWarpRows_;
  FA_CONST int kWarps = kWarps_;
  FA_CONST int kProblems = kProblems_;
  FA_CONST int kThreads = kWarps * kSimdWidth;
  /// 16 bytes of padding per row put the rows that one fragment load reads
  /// in different banks (short_attention_problem_bytes counts them).
  FA_CONST int kSmemLd = kHeadDim + 16 / sizeof(T);
  /// One sequence's Q (or K, or V) block.
  FA_CONST int kBlockElems = kSeq * kSmemLd;
  /// Q, K and V of every sequence, in that order, sequence after sequence.
  FA_CONST int kSmemElems = kProblems * 3 * kBlockElems;

  static_assert(kSeq % kWarpRows == 0, "row groups must tile the sequence");
};

/// Copies Q, K and V of sequences first .. first + problems - 1 into
/// `smem`, each a Block of kSeq rows, and waits for them. Rows past L_q and
/// L_k are zero-filled: finite, so that a masked key's zero weight times its
/// value stays zero.
template <typename Block, typename Shape>
FA_FUNC void short_load_problems(
    const FA_CONSTANT AttnParams& p,
    const FA_DEVICE typename Shape::elem_type* q,
    const FA_DEVICE typename Shape::elem_type* k,
    const FA_DEVICE typename Shape::elem_type* v,
    FA_THREADGROUP typename Shape::elem_type* smem,
    int first,
    int problems,
    int tid) {
  constexpr int kBlock = Shape::kBlockElems;
  FA_UNROLL
  for (int i = 0; i < Shape::kProblems; ++i) {
    if (i < problems) {
      const int pid = first + i;
      const int batch = pid / p.H_q;
      const int head = pid - batch * p.H_q;
      const int kv_head = head / p.gqa_factor;
      FA_THREADGROUP typename Shape::elem_type* dst = smem + 3 * i * kBlock;
      Block::load_safe(
          dst,
          q + batch * p.q_strides[0] + head * p.q_strides[1],
          p.q_strides[2],
          p.L_q,
          tid);
      Block::load_safe(
          dst + kBlock,
          k + batch * p.k_strides[0] + kv_head * p.k_strides[1],
          p.k_strides[2],
          p.L_k,
          tid);
      Block::load_safe(
          dst + 2 * kBlock,
          v + batch * p.v_strides[0] + kv_head * p.v_strides[1],
          p.v_strides[2],
          p.L_k,
          tid);
    }
  }
  Block::commit();
  Block::template wait<0>();
  FA_BARRIER();
}

/// One threadgroup's sequences: `a` holds the call's arrays as the general
/// kernel's do (attention_args.h); the short kernel writes no LSE and reads
/// no classes by block, so those two stay unbound.
template <typename Target, typename Shape>
FA_FUNC void short_attention_block(
    AttnArrays<typename Shape::elem_type> a,
    const FA_CONSTANT AttnParams& p,
    FA_THREADGROUP typename Shape::elem_type* smem,
    ShortAttnFeatures f,
    int block,
    int warp,
    lane_t lane) {
  typedef typename Shape::elem_type T;
  typedef typename Target::template FragA<T> FragA;
  constexpr int D = Shape::kHeadDim;
  constexpr int kSeq = Shape::kSeq;
  constexpr int kWarpRows = Shape::kWarpRows;
  constexpr int kLd = Shape::kSmemLd;
  constexpr int kBlock = Shape::kBlockElems;
  // A sequence's Q, K and V are each one block of kSeq rows.
  typedef PaddedBlock<Target, T, kSeq, D, D, Shape::kThreads> Block;
  static_assert(Block::kElems == kBlock, "blocks are the shape's");

  const int tid = warp * kSimdWidth + lane;
  const int n_problems = p.B * p.H_q;
  const int first = block * Shape::kProblems;
  const int problems = n_problems - first < Shape::kProblems
      ? n_problems - first
      : Shape::kProblems;

  // ------------------------------------------------------- load Q, K, V
  short_load_problems<Block, Shape>(
      p, a.q, a.k, a.v, smem, first, problems, tid);

  const int row_groups = (p.L_q + kWarpRows - 1) / kWarpRows;
  for (int item = warp; item < problems * row_groups; item += Shape::kWarps) {
    const int i = item / row_groups;
    const int row0 = (item - i * row_groups) * kWarpRows;
    const int pid = first + i;
    const int batch = pid / p.H_q;
    const int head = pid - batch * p.H_q;
    const FA_THREADGROUP T* seq = smem + 3 * i * kBlock;
    const KVResident<T> kv = {seq + kBlock, seq + 2 * kBlock};
    // The whole row is one key block (kb 0), ragged where L_k < kSeq.
    const AttnBlockMasks<T, kSeq> masks =
        attention_block_masks<T, kSeq, true>(
            p, a.mask, f.causal, f.has_mask, f.bool_mask, batch, head, row0);

    QInRegisters<FragA, kWarpRows, D> q_op;
    tile_load_shared<kLd, 1>(q_op.tile, seq + row0 * kLd, lane);
    AttnStep<Target, T, kWarpRows, kSeq, D> st;
    attention_step_begin(
        st, f.has_sinks, f.has_sinks ? a.sinks[head] : T(0));
    attention_step<Block, Block>(
        st, q_op, masks, kv, 0, masks.visits.at(0), lane);
    attention_step_end(st);

    // --------------------------------------------------------- store
    FA_DEVICE T* o = a.out + batch * p.o_strides[0] + head * p.o_strides[1] +
        row0 * p.o_strides[2];
    const int rows_left = p.L_q - row0;
    if (rows_left >= kWarpRows) {
      tile_store_device(o, st.o, p.o_strides[2], lane);
    } else {
      tile_store_device_safe(o, st.o, p.o_strides[2], rows_left, D, lane);
    }
  }
}

} // namespace fa
