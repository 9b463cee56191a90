// How a neighborhood-attention launch covers the queries with threadgroups:
// the query tile's shape, the tiles along each axis, and the warps' places in
// a tile. Shared by the host (which chooses it) and the kernels (which read
// it, as a second POD beside NaParams).
//
// A query tile lies inside one dilation group of every axis, so its queries,
// and the keys they see, are dense in that group: along an axis of dilation
// d, the tile holds group indices j0 .. j0 + extent - 1 of one group, which
// are the positions g + j d. A warp's rows run along the fastest axis in use
// (axis n_axes - 1): a fragment's rows are then evenly strided in memory,
// which is what the fragments' device loads and stores take. The warps of a
// threadgroup spread over the axes as `warps` says.
#pragma once

#include "mlx_fused_attn/na_params.h"
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
  /// (na_attention_run_1d); 1: a tile a threadgroup. na_run_for chooses it.
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

/// The grid for `warps` warps per axis (unused axes: 1) and `warp_rows`
/// rows a warp.
FA_HOST_DEVICE NaGrid na_make_grid(
    const NaAxis* axes,
    int n_axes,
    const int* warps,
    int warp_rows) {
  NaGrid g;
  g.blocks = 1;
  for (int a = 0; a < kNaMaxAxes; ++a) {
    g.warps[a] = warps[a];
    g.extent[a] = warps[a] * (a == n_axes - 1 ? warp_rows : 1);
    const int longest = (axes[a].n + axes[a].d - 1) / axes[a].d;
    g.tiles[a] = (longest + g.extent[a] - 1) / g.extent[a];
    g.blocks *= axes[a].d * g.tiles[a];
  }
  g.run = 1;
  return g;
}

/// The grid with the fewest K/V blocks to load over the whole launch, among
/// the ways of spreading `n_warps` (a power of two) over the axes in use:
/// tiles times the key blocks of a tile's key box, whose side along each
/// axis is at most extent + k - 1 (the union of the tile's windows) and at
/// most the group. Ties keep the first split found, which puts the most
/// warps on the fastest axis.
FA_HOST_DEVICE NaGrid na_choose_grid(
    const NaAxis* axes,
    int n_axes,
    int n_warps,
    int warp_rows,
    int key_block) {
  int log_warps = 0;
  while ((1 << log_warps) < n_warps) {
    ++log_warps;
  }
  NaGrid best = {};
  stride_t best_cost = -1;
  // Each split gives axis a 2^e[a] warps; enumerate the exponents in base
  // (log_warps + 1), fastest axis last, keeping those that sum to log_warps.
  int combos = 1;
  for (int a = 0; a < n_axes; ++a) {
    combos *= log_warps + 1;
  }
  for (int c = 0; c < combos; ++c) {
    int warps[kNaMaxAxes] = {1, 1, 1};
    int rest = c;
    int used = 0;
    for (int a = n_axes - 1; a >= 0; --a) {
      const int e = rest % (log_warps + 1);
      rest /= log_warps + 1;
      warps[a] = 1 << e;
      used += e;
    }
    if (used != log_warps) {
      continue;
    }
    const NaGrid g = na_make_grid(axes, n_axes, warps, warp_rows);
    stride_t keys = 1;
    for (int a = 0; a < n_axes; ++a) {
      const int longest = (axes[a].n + axes[a].d - 1) / axes[a].d;
      const int side = g.extent[a] + axes[a].k - 1;
      keys *= side < longest ? side : longest;
    }
    const stride_t cost = g.blocks * ((keys + key_block - 1) / key_block);
    if (best_cost < 0 || cost < best_cost) {
      best = g;
      best_cost = cost;
    }
  }
  return best;
}


/// 1-D: the key blocks of `key_block` keys that a tile's key box (at most
/// extent + k - 1 keys: windows start at most one key apart from query to
/// query) can touch, at any alignment.
FA_HOST_DEVICE int na_box_blocks_1d(int extent, NaAxis a, int key_block) {
  return (extent + a.k - 2 + key_block - 1) / key_block + 1;
}

/// `g` with runs of consecutive 1-D tiles (NaGrid::run), so that about
/// `resident` threadgroups (as many as the device holds at once) cover the
/// `batch_heads` (batch x heads) grids; `run_override` > 0 forces the run
/// length (tests). Runs need a box of at most stages - 1 blocks (the ring
/// keeps one stage for the next tile's copies); otherwise, for more than one
/// axis, or where a run would be one tile, `g` stays as it is.
FA_HOST_DEVICE NaGrid na_run_for(
    NaGrid g,
    const NaAxis* axes,
    int n_axes,
    int key_block,
    int stages,
    long long batch_heads,
    long long resident,
    int run_override) {
  if (n_axes != 1 ||
      na_box_blocks_1d(g.extent[0], axes[0], key_block) > stages - 1) {
    return g;
  }
  long long run = run_override;
  if (run <= 0) {
    const long long tiles = batch_heads * g.blocks;
    run = resident > 0 ? (tiles + resident - 1) / resident : 1;
  }
  if (run <= 1) {
    return g;
  }
  if (run > g.tiles[0]) {
    run = g.tiles[0];
  }
  g.run = static_cast<int>(run);
  g.blocks = axes[0].d * ((g.tiles[0] + g.run - 1) / g.run);
  return g;
}

} // namespace fa
