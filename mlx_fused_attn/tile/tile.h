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

/// Element (r, c) of the tile into dst[r * kStrR + c * kStrC], one element
/// at a time: swapped strides store the tile transposed (the backward's
/// dS^T, stored as dS for a product over its keys).
template <int kStrR, int kStrC, typename F, int R, int C, typename U>
FA_FUNC void tile_store_shared(
    FA_THREADGROUP U* dst,
    const FA_THREAD Tile<F, R, C>& t,
    lane_t lane) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      FA_UNROLL
      for (int e = 0; e < F::kElems; ++e) {
        dst[(i * F::kRows + F::row(lane, e)) * kStrR +
            (j * F::kCols + F::col(lane, e)) * kStrC] = frag_at(t, i, j).v[e];
      }
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

/// dst[r] = rows[the slot of row r] for the rows r < lim_rows of a tile of
/// type TileT: one value a row (per-row statistics beside a tile), written
/// by the lane holding the row's column 0.
template <typename TileT>
FA_FUNC void tile_store_rows(
    FA_DEVICE float* dst,
    const FA_THREAD float* rows,
    int lim_rows,
    lane_t lane) {
  typedef typename TileT::frag_type F;
  FA_UNROLL
  for (int i = 0; i < TileT::kTileRows; ++i) {
    FA_UNROLL
    for (int e = 0; e < F::kElems; ++e) {
      const int r = i * F::kRows + F::row(lane, e);
      if (F::col(lane, e) == 0 && r < lim_rows) {
        dst[r] = rows[i * F::kRowsPerLane + F::row_slot(e)];
      }
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

/// dst[r * ld + c] += element (r, c) for the rows r < lim_rows, as device
/// atomics (the fragment's atomic_add_device: no value returned, and two
/// adjacent columns in one operation where the target has it).
template <typename F, int R, int C>
FA_FUNC void tile_atomic_add_device(
    FA_DEVICE float* dst,
    const FA_THREAD Tile<F, R, C>& t,
    stride_t ld,
    int lim_rows,
    lane_t lane) {
  FA_UNROLL
  for (int i = 0; i < R; ++i) {
    FA_UNROLL
    for (int j = 0; j < C; ++j) {
      F::atomic_add_device(
          frag_at(t, i, j),
          dst + (i * F::kRows) * ld + j * F::kCols,
          ld,
          lim_rows - i * F::kRows,
          lane);
    }
  }
}

} // namespace fa
