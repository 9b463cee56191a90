// Q of the attention kernel held in registers for the whole run: each warp's
// rows as a tile of A fragments, loaded straight from device memory. The
// per-warp products (padded_block.h) and the warpgroup products that take A
// from registers (swizzled_block.h) read it; q_in_shared.h keeps Q in
// threadgroup memory instead. A kernel body sees the same interface in both:
//
//   kSmemElems                       threadgroup memory it needs (here none)
//   q_load(q, src, ld, rows, ragged, smem, warp, lane)
//                                    starts loading the threadgroup's rows
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/tile.h"

namespace fa {

/// kCols columns, whole fragments, of which the first kSrcCols are Q's
/// and the rest zero (a head dim padded to whole fragments).
template <typename FragA, int kWarpRows, int kCols, int kSrcCols = kCols>
struct QInRegisters {
  FA_CONST int kSmemElems = 0;
  Tile<FragA, kWarpRows / FragA::kRows, kCols / FragA::kCols> tile;
};

/// `src` is the threadgroup's first query row, of which `rows` exist when
/// `ragged` (the others read as zero, so that products with them stay
/// finite); warp `warp` loads its kWarpRows of them. `smem` is unused.
template <typename FragA, int kWarpRows, int kCols, int kSrcCols, typename T>
FA_FUNC void q_load(
    FA_THREAD QInRegisters<FragA, kWarpRows, kCols, kSrcCols>& q,
    const FA_DEVICE T* src,
    stride_t ld,
    int rows,
    bool ragged,
    FA_THREADGROUP T*,
    int warp,
    lane_t lane) {
  src += warp * kWarpRows * ld;
  if (ragged || kSrcCols < kCols) {
    tile_load_device_safe(
        q.tile, src, ld, rows - warp * kWarpRows, kSrcCols, 0.0f, lane);
  } else {
    tile_load_device(q.tile, src, ld, lane);
  }
}

/// The threadgroup's rows as a block of type Block (rows x head dim, padded
/// as its products read it) in threadgroup memory, for a product that takes
/// them as its B (O += P B: the backward's dQ += dS K): registers hold each
/// warp's rows as A fragments only, so they are copied into `copy`
/// (Block::kElems). The copy joins the next committed group, as q_load's
/// does; its arguments are q_load's.
template <
    typename Block,
    typename FragA,
    int kWarpRows,
    int kCols,
    int kSrcCols,
    typename T>
FA_FUNC const FA_THREADGROUP T* operand_block(
    const FA_THREAD QInRegisters<FragA, kWarpRows, kCols, kSrcCols>&,
    FA_THREADGROUP T* copy,
    const FA_DEVICE T* src,
    stride_t ld,
    int rows,
    bool ragged,
    int tid) {
  if (ragged) {
    Block::load_safe(copy, src, ld, rows, tid);
  } else {
    Block::load(copy, src, ld, tid);
  }
  return copy;
}

} // namespace fa
