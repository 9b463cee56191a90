// How a neighborhood-attention launch covers the queries with threadgroups:
// the query tile's shape, the tiles along each axis, and the warps' places in
// a tile. Shared by the host (which chooses it, na_grid_choice.h) and
// the kernels (which read it, as a second POD beside NaParams).
//
// A query tile lies inside one dilation group of every axis, so its queries,
// and the keys they see, are dense in that group: along an axis of dilation
// d, the tile holds group indices j0 .. j0 + extent - 1 of one group, which
// are the positions g + j d. A warp's rows run along the fastest axis in use
// (axis n_axes - 1): a fragment's rows are then evenly strided in memory,
// which is what the fragments' device loads and stores take. The warps of a
// threadgroup spread over the axes as `warps` says.
#pragma once

#include "mlx_fused_attn/families/neighborhood/na_params.h"
#include "mlx_fused_attn/na_window.h"

namespace fa {

struct NaGrid {
  /// Warps of a threadgroup along each axis (1 on unused axes); their product
  /// is the kernel's warp count.
  int warps[kNaMaxAxes];
  /// Query tile along each axis, in indices of a dilation group: the warps
  /// along the axis, times a warp's rows on the fastest axis in use.
  int extent[kNaMaxAxes];
  /// Tiles per dilation group along each axis (enough for its longest group).
  int tiles[kNaMaxAxes];
  /// Threadgroups per (batch, head): the product over the axes of
  /// dilation * tiles. Threadgroup t is decoded fastest axis first, tile
  /// index fastest within a group, so neighbouring tiles (which share keys)
  /// run together.
  int blocks;
  /// 1-D: consecutive query tiles of a dilation group that one threadgroup
  /// takes in turn, streaming their keys through a ring of key blocks
  /// (na_attention_run_1d); 1: a tile a threadgroup. na_run_for
  /// (na_grid_choice.h) chooses it.
  int run;
};

/// The union of the windows of queries j_first .. j_last of a dilation group
/// of length m, in indices of that group: windows move right with the query
/// and overlap, so the union is the range from the first query's window
/// start to the last query's window end.
FA_HOST_DEVICE NaWindow
na_union_window(NaAxis a, int m, int j_first, int j_last) {
  const NaWindow first = na_group_window(a, m, j_first);
  const NaWindow last = na_group_window(a, m, j_last);
  NaWindow w;
  w.first = first.first;
  w.count = last.first + last.count - first.first;
  return w;
}

} // namespace fa
