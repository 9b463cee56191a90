// A register tile: a grid of fragments held by one simdgroup (warp), sized in
// fragments so that the same code serves 8x8 Metal fragments and CUDA's
// role-dependent mma.sync shapes. The fragment carries its element type (on
// CUDA each role has its own register type), so a tile is Tile<Frag, R, C>.
//
// Memory ops, destination first. Offsets of a fragment inside the tile are
// whole fragments; the lane-level layout is the fragment's business.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

template <typename Frag, int kTileRows_, int kTileCols_>
struct Tile {
  typedef Frag frag_type;
  typedef typename Frag::elem_type elem_type;

  FA_CONST int kTileRows = kTileRows_; ///< fragments down
  FA_CONST int kTileCols = kTileCols_; ///< fragments across
  FA_CONST int kRows = kTileRows * Frag::kRows; ///< elements down
  FA_CONST int kCols = kTileCols * Frag::kCols; ///< elements across
  /// Rows of the tile one lane holds registers on: the length of the
  /// per-lane row vectors that row_reduce and row_bin_op read and write.
  FA_CONST int kRowSlots = kTileRows * Frag::kRowsPerLane;

  Frag frags[kTileRows * kTileCols];
};

template <typename F, int R, int C>
FA_FUNC FA_THREAD F& frag_at(FA_THREAD Tile<F, R, C>& t, int i, int j) {
  return t.frags[i * C + j];
}

template <typename F, int R, int C>
FA_FUNC const FA_THREAD F&
frag_at(const FA_THREAD Tile<F, R, C>& t, int i, int j) {
  return t.frags[i * C + j];
}

template <typename F, int R, int C>
FA_FUNC void tile_fill(
    FA_THREAD Tile<F, R, C>& t,
    typename F::elem_type value) {
  FA_UNROLL
  for (int f = 0; f < R * C; ++f) {
    FA_UNROLL
    for (int e = 0; e < F::kElems; ++e) {
      t.frags[f].v[e] = value;
    }
  }
}

/// Element (r, c) of the tile is src[r * kStrR + c * kStrC]: a transposed
/// read is just swapped strides, which CUDA maps to ldmatrix.trans.
template <int kStrR, int kStrC, typename F, int R, int C, typename U>
FA_FUNC void tile_load_shared(
    FA_THREAD Tile<F, R, C>& t,
    const FA_THREADGROUP U* src,
    lane_t lane) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      F::template load_shared<kStrR, kStrC>(
          frag_at(t, i, j),
          src + (i * F::kRows) * kStrR + (j * F::kCols) * kStrC,
          lane);
    }
  }
}

/// Row-major device memory with row stride ld, unit column stride.
template <typename F, int R, int C, typename U>
FA_FUNC void tile_load_device(
    FA_THREAD Tile<F, R, C>& t,
    const FA_DEVICE U* src,
    stride_t ld,
    lane_t lane) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      F::load_device(
          frag_at(t, i, j), src + (i * F::kRows) * ld + j * F::kCols, ld, lane);
    }
  }
}

/// As tile_load_device, reading only rows < lim_rows and columns < lim_cols
/// (counted from src) and filling the rest with `fill`.
template <typename F, int R, int C, typename U>
FA_FUNC void tile_load_device_safe(
    FA_THREAD Tile<F, R, C>& t,
    const FA_DEVICE U* src,
    stride_t ld,
    int lim_rows,
    int lim_cols,
    typename F::elem_type fill,
    lane_t lane) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      F::load_device_safe(
          frag_at(t, i, j),
          src + (i * F::kRows) * ld + j * F::kCols,
          ld,
          lim_rows - i * F::kRows,
          lim_cols - j * F::kCols,
          fill,
          lane);
    }
  }
}

template <typename F, int R, int C, typename U>
FA_FUNC void tile_store_device(
    FA_DEVICE U* dst,
    const FA_THREAD Tile<F, R, C>& t,
    stride_t ld,
    lane_t lane) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      F::store_device(
          frag_at(t, i, j), dst + (i * F::kRows) * ld + j * F::kCols, ld, lane);
    }
  }
}

/// Writes only rows < lim_rows and columns < lim_cols (counted from dst).
template <typename F, int R, int C, typename U>
FA_FUNC void tile_store_device_safe(
    FA_DEVICE U* dst,
    const FA_THREAD Tile<F, R, C>& t,
    stride_t ld,
    int lim_rows,
    int lim_cols,
    lane_t lane) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      F::store_device_safe(
          frag_at(t, i, j),
          dst + (i * F::kRows) * ld + j * F::kCols,
          ld,
          lim_rows - i * F::kRows,
          lim_cols - j * F::kCols,
          lane);
    }
  }
}

} // namespace fa
