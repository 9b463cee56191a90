// Q of the attention kernel held in threadgroup (shared) memory in padded
// rows (smem_layout.h's PaddedRows), read by the per-warp products
// (padded_block.h) one k step of A fragments at a time: the interface of
// q_in_registers.h. Where a warp's Q and O tiles together would not fit in
// registers (CUDA's fp32 at D >= 192: 2 x 96 registers a thread at 192, 2 x
// 128 at 256, which ptxas spilled by the kilobyte), only one k step of Q is
// held, at the price of Q's threadgroup memory and a load of it for every
// key block. q_in_shared.h is the counterpart for Hopper's warpgroup
// products (swizzled panels).
//
// The copy is the target's loader; q_load issues it without committing a
// group, so that it joins the group of the first K/V block and the wait and
// barrier before that block's products cover Q too (the body issues Q
// first).
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/platform.h"

namespace fa {

/// kRows query rows of kCols columns, whole fragments, of which the first
/// kSrcCols are Q's and the rest zero (a head dim padded to whole
/// fragments); each warp reads its kWarpRows.
template <
    typename Target,
    typename T,
    int kRows,
    int kCols,
    int kSrcCols,
    int kWarpRows,
    int kThreads>
struct QInPaddedShared {
  FA_CONST int kLd = kCols + 16 / int(sizeof(T)); ///< as padded_block.h's
  FA_CONST int kSmemElems = kRows * kLd;
  typedef typename Target::
      template Loader<T, kRows, kCols, kLd, kThreads, kSrcCols>
          Loader;
  const FA_THREADGROUP T* smem; ///< this warp's first row
};

template <
    typename Target,
    typename T,
    int kRows,
    int kCols,
    int kSrcCols,
    int kWarpRows,
    int kThreads>
FA_FUNC void q_load(
    FA_THREAD QInPaddedShared<
        Target,
        T,
        kRows,
        kCols,
        kSrcCols,
        kWarpRows,
        kThreads>& q,
    const FA_DEVICE T* src,
    stride_t ld,
    int rows,
    bool ragged,
    FA_THREADGROUP T* smem,
    int warp,
    lane_t lane) {
  typedef QInPaddedShared<
      Target, T, kRows, kCols, kSrcCols, kWarpRows, kThreads>
      Q;
  const int tid = warp * kSimdWidth + lane;
  if (ragged) {
    Q::Loader::load_safe(smem, src, ld, rows, tid);
  } else {
    Q::Loader::load(smem, src, ld, tid);
  }
  q.smem = smem + warp * kWarpRows * Q::kLd;
}

/// `Target` with Q in padded shared (threadgroup) memory, read a k step at
/// a time: the one definition both backends' Q-in-shared targets take.
template <typename Target>
struct WithQInPaddedShared : Target {
  template <
      typename T,
      int kRows,
      int kCols,
      int kSrcCols,
      int kWarpRows,
      int kThreads>
  using QOperand =
      QInPaddedShared<Target, T, kRows, kCols, kSrcCols, kWarpRows, kThreads>;
};

} // namespace fa
