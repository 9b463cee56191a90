// dQ inside the dK/dV kernel (FlashAttention-2's one-kernel backward), the
// CUDA form: each query block a threadgroup visits adds its keys' share,
//
//   dQ[block] += dS K     (dS: the block's queries x the threadgroup's keys),
//
// into an fp32 accumulator [B, H_q, L_q, D] through device atomics;
// a conversion at the end writes dQ = scale * accumulator in the input type.
// The accumulator starts at zero without a launch of its own: the row-dot
// kernel, which runs first in stream order and visits every (batch, head,
// row) once, zeroes each row it owns as it writes D (set_device_data gives
// memory with no defined contents, and a memset node would be a fourth
// launch of about the row dot's own cost).
//
// Metal keeps the two-kernel form: it has float atomics only on Metal 3
// GPUs (none in threadgroup memory before them), and only with relaxed
// ordering, so one form could not serve every GPU it runs on; its dQ
// kernel needs no atomics.
//
// Per visited block: every warp stores its dS^T tile (keys x queries, in
// registers) into threadgroup memory as dS (queries x keys), one barrier,
// then the warps share the product over the block's query rows (and, where
// there are fewer row fragments than warps, over the head dim), each
// product's rows added to the accumulator. The dS buffer alternates
// between two halves, so the next block's stores need no second barrier.
// K, the product's B, is the threadgroup's keys as a block of the target's
// streamed-block type (operand_block: the warpgroup products' K in shared
// memory already, or a copy beside the registers' one).
#pragma once

#include "mlx_fused_attn/families/attention_backward/attention_backward_args.h"
#include "mlx_fused_attn/families/attention_backward/backward_params.h"
#include "mlx_fused_attn/kernels/attention.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/q_in_registers.h"
#include "mlx_fused_attn/tile/q_in_shared.h"
#include "mlx_fused_attn/tile/tile.h"

namespace fa {

/// dQ accumulated by the dK/dV kernel through atomics (the body's Dq
/// policy; BwdNoDq in attention_backward.h is the two-kernel form's).
template <typename Target, typename Shape>
struct BwdDqAtomics {
  typedef typename Shape::elem_type T;
  typedef typename Target::template FragA<T> FragA;
  typedef typename Target::FragC FragC;
  typedef AttnQOperand<Target, Shape> Operand;
  FA_CONST int kCols = AttnPaddedHeadDim<Target, Shape::kHeadDim>::value;
  static_assert(
      kCols == Shape::kHeadDim,
      "the backward's head dims are whole fragments: the accumulator's rows "
      "are D long");
  typedef typename Target::
      template KVBlock<T, Shape::kBQ, kCols, Shape::kHeadDim, Shape::kThreads>
          KeyBlock;
  /// A row of dS: one query's keys, padded by 16 bytes (as padded blocks).
  FA_CONST int kDsLd = Shape::kBQ + 16 / int(sizeof(T));
  FA_CONST int kDsElems = Shape::kBK * kDsLd;
  /// K's copy where the operand holds it in registers only.
  FA_CONST int kKCopyElems = Operand::kSmemElems == 0 ? KeyBlock::kElems : 0;
  /// Threadgroup memory after the operands: dS twice, then K's copy.
  FA_CONST int kSmemElems = 2 * kDsElems + kKCopyElems;
  FA_CONST int kRowFrags = Shape::kBK / FragC::kRows;
  FA_CONST int kColFrags = kCols / FragC::kCols;
  /// Warps sharing one row fragment's columns (1: a warp takes whole rows).
  FA_CONST int kColShares =
      kRowFrags >= Shape::kWarps ? 1 : Shape::kWarps / kRowFrags;
  static_assert(
      kRowFrags % Shape::kWarps == 0 || Shape::kWarps % kRowFrags == 0,
      "the warps share the query rows evenly");
  static_assert(
      kColShares == 1 || KeyBlock::kProductWarps == 1,
      "warpgroup products take whole rows of a warp each");
  static_assert(Shape::kWarpRows == FragA::kRows, "a warp owns one fragment row of keys");

  FA_DEVICE float* acc; ///< row 0 of the batch entry's first group head
  const FA_THREADGROUP T* k_block;
  FA_THREADGROUP T* ds;
  stride_t head_elems; ///< L_q * kCols: one head's rows
  int L_q;

  /// Starts K's copy where one is needed (before the pipeline's first
  /// commit, so that its wait covers it).
  static FA_FUNC BwdDqAtomics start(
      AttnBwdArrays<T> a,
      const FA_CONSTANT AttnBwdParams& bp,
      AttnBwdSmem<T> smem,
      const FA_THREAD Operand& k_op,
      AttnBwdPlace at,
      bool k_ragged,
      int tid) {
    const FA_CONSTANT AttnParams& p = bp.fwd;
    const int key0 = at.block * Shape::kBQ;
    FA_THREADGROUP T* ds = smem.dq;
    const BwdDqAtomics dq = {
        a.dq_acc + stride_t(at.batch * p.H_q + at.head * p.gqa_factor) *
            p.L_q * kCols,
        operand_block<KeyBlock>(
            k_op, ds + 2 * kDsElems,
            a.k + at.batch * p.k_strides[0] + at.head * p.k_strides[1] +
                key0 * p.k_strides[2],
            p.k_strides[2], p.L_k - key0, k_ragged, tid),
        ds,
        stride_t(p.L_q) * kCols,
        p.L_q};
    return dq;
  }

  /// dQ[q0 .. q0 + kBK) of group head `head` += dS K, dS^T being this
  /// warp's tile of the block (the j-th the kernel streams).
  template <typename ScoreOperand>
  FA_FUNC void add(
      const FA_THREAD ScoreOperand& ds_t,
      int j,
      int head,
      int q0,
      int warp,
      lane_t lane) const {
    FA_THREADGROUP T* block = ds + (j % 2) * kDsElems;
    tile_store_shared<1, kDsLd>(block + warp * Shape::kWarpRows, ds_t, lane);
    FA_BARRIER();
    FA_DEVICE float* dst = acc + head * head_elems + stride_t(q0) * kCols;
    if constexpr (kColShares == 1) {
      add_rows(block, dst, L_q - q0, warp, lane);
    } else {
      add_columns(block, dst, L_q - q0, warp, lane);
    }
  }

 private:
  typedef Tile<FragA, 1, Shape::kBQ / FragA::kCols> DsRows;

  /// Row fragments warp, warp + kWarps, ...: each the full head dim.
  FA_FUNC void add_rows(
      const FA_THREADGROUP T* block,
      FA_DEVICE float* dst,
      int rows,
      int warp,
      lane_t lane) const {
    FA_UNROLL
    for (int g = 0; g < kRowFrags / Shape::kWarps; ++g) {
      const int r0 = (g * Shape::kWarps + warp) * FragC::kRows;
      DsRows a;
      tile_load_shared<kDsLd, 1>(a, block + r0 * kDsLd, lane);
      Tile<FragC, 1, kColFrags> d;
      tile_fill(d, 0.0f);
      KeyBlock::mma_ab(d, a, k_block, lane);
      tile_atomic_add_device(dst + r0 * kCols, d, kCols, rows - r0, lane);
    }
  }

  /// Row fragment warp % kRowFrags, its column fragments warp / kRowFrags,
  /// then every kColShares-th on.
  FA_FUNC void add_columns(
      const FA_THREADGROUP T* block,
      FA_DEVICE float* dst,
      int rows,
      int warp,
      lane_t lane) const {
    const int r0 = (warp % kRowFrags) * FragC::kRows;
    DsRows a;
    tile_load_shared<kDsLd, 1>(a, block + r0 * kDsLd, lane);
    FA_UNROLL
    for (int i = 0; i < (kColFrags + kColShares - 1) / kColShares; ++i) {
      const int c0 = (warp / kRowFrags + i * kColShares) * FragC::kCols;
      if (c0 < kCols) {
        Tile<FragC, 1, 1> d;
        tile_fill(d, 0.0f);
        KeyBlock::mma_ab(d, a, k_block + c0, lane);
        tile_atomic_add_device(dst + r0 * kCols + c0, d, kCols, rows - r0, lane);
      }
    }
  }
};

/// Zeroes row `r` of the accumulator: run by the row-dot kernel's warp of
/// the row (the top of this file says why there).
FA_FUNC void attention_backward_zero_dq_row(
    FA_DEVICE float* acc,
    const FA_CONSTANT AttnParams& p,
    AttnBwdRow r,
    lane_t lane) {
  if (r.row >= p.L_q) {
    return;
  }
  acc += attention_bwd_row_index(p, r) * p.D;
  for (int c = int(lane) * 4; c < p.D; c += 4 * kSimdWidth) {
    *reinterpret_cast<FA_DEVICE float4*>(acc + c) = make_float4(0, 0, 0, 0);
  }
}

/// dQ's row `r` from the accumulator: scale times it, in T.
template <typename T>
FA_FUNC void attention_backward_convert_dq_row(
    FA_DEVICE T* dq,
    const FA_DEVICE float* acc,
    const FA_CONSTANT AttnBwdParams& bp,
    AttnBwdRow r,
    lane_t lane) {
  const FA_CONSTANT AttnParams& p = bp.fwd;
  if (r.row >= p.L_q) {
    return;
  }
  acc += attention_bwd_row_index(p, r) * p.D;
  dq += attention_bwd_row_offset(bp.dq_strides, r);
  const float scale = p.scale_log2 / FA_LOG2E;
  for (int c = int(lane) * 4; c < p.D; c += 4 * kSimdWidth) {
    const float4 x = *reinterpret_cast<const FA_DEVICE float4*>(acc + c);
    dq[c] = static_cast<T>(scale * x.x);
    dq[c + 1] = static_cast<T>(scale * x.y);
    dq[c + 2] = static_cast<T>(scale * x.z);
    dq[c + 3] = static_cast<T>(scale * x.w);
  }
}

} // namespace fa
