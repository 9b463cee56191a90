// Q of the attention kernel held in threadgroup (shared) memory for the whole
// run, as the A operand of Hopper's warpgroup products read through a
// descriptor (swizzled_block.h): the interface of q_in_registers.h. Q's
// registers (32 a thread at D = 128) are then free, which is what lets four
// 64-query blocks share a multiprocessor at D = 128 (128 registers a
// thread); the price is Q's threadgroup memory and the tensor cores reading
// A from shared memory on every product.
//
// The copy is cp.async into the same swizzled panels as a K block, one
// 64-row block a warpgroup, so that each warpgroup's A operand is a block of
// its own. q_load issues it without committing a group: the copies join the
// group of the first K/V block, so the wait and barrier before that block's
// products cover Q too (the body issues Q first).
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/cp_async_loader.h"
#include "mlx_fused_attn/tile/smem_layout.h"

namespace fa {

/// kCols columns, whole fragments, of which the first kSrcCols are Q's
/// and the rest zero (a head dim padded to whole fragments).
template <typename T, int kRows, int kCols, int kThreads, int kSrcCols = kCols>
struct QInShared {
  FA_CONST int kGroupRows = 64; ///< the rows of a warpgroup's products
  typedef SwizzledRows<T, kGroupRows, kCols> Layout;
  typedef CpAsyncLoader<T, kGroupRows, kCols, Layout, kThreads, kSrcCols>
      Loader;
  FA_CONST int kSmemElems = kRows * kCols;
  static_assert(kRows % kGroupRows == 0, "whole warpgroups of query rows");
  static_assert(kThreads == kRows * 2, "a warp for every 16 query rows");
  const T* smem; ///< this thread's warpgroup's block
};

template <typename T, int kRows, int kCols, int kThreads, int kSrcCols>
FA_FUNC void q_load(
    QInShared<T, kRows, kCols, kThreads, kSrcCols>& q,
    const T* src,
    stride_t ld,
    int rows,
    bool ragged,
    T* smem,
    int warp,
    lane_t lane) {
  typedef QInShared<T, kRows, kCols, kThreads, kSrcCols> Q;
  const int tid = warp * kSimdWidth + lane;
  FA_UNROLL
  for (int g = 0; g < kRows / Q::kGroupRows; ++g) {
    const int first = g * Q::kGroupRows;
    if (ragged) {
      Q::Loader::load_safe(
          smem + first * kCols, src + first * ld, ld, rows - first, tid);
    } else {
      Q::Loader::load(smem + first * kCols, src + first * ld, ld, tid);
    }
  }
  q.smem = smem + (warp / 4) * Q::kGroupRows * kCols;
}

/// The threadgroup's rows as a block of type Block for a product that takes
/// them as its B (q_in_registers.h's operand_block): one warpgroup's rows
/// are already a swizzled block of the streamed blocks' layout, so the
/// operand's own memory is the block and nothing is copied.
template <
    typename Block,
    typename T,
    int kRows,
    int kCols,
    int kThreads,
    int kSrcCols>
FA_FUNC const T* operand_block(
    const QInShared<T, kRows, kCols, kThreads, kSrcCols>& q,
    T*,
    const T*,
    stride_t,
    int,
    bool,
    int) {
  typedef QInShared<T, kRows, kCols, kThreads, kSrcCols> Q;
  // A warpgroup's block of rows is a SwizzledBlock of as many rows: both
  // are SwizzledRows<T, kGroupRows, kCols>.
  static_assert(
      kRows == Q::kGroupRows && Block::kProductWarps == 4 &&
          Block::kElems == Q::kSmemElems,
      "the rows are one swizzled block of a warpgroup's rows");
  return q.smem;
}

} // namespace fa
