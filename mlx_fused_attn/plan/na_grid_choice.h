// How the host chooses a neighborhood-attention launch's NaGrid
// (families/neighborhood/na_grid.h): the split of the warps over the axes and the 1-D runs
// of tiles. Host code only (C++ and the CUDA host), kept out of what the
// .metal files include: the kernels only read the grid, and these take
// host pointers and 64-bit counts.
#pragma once

#include "mlx_fused_attn/families/neighborhood/na_grid.h"
#include "mlx_fused_attn/families/neighborhood/na_params.h"
#include "mlx_fused_attn/na_window.h"

namespace fa {

/// The grid for `warps` warps per axis (unused axes: 1) and `warp_rows`
/// rows a warp.
inline NaGrid na_make_grid(
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
inline NaGrid na_choose_grid(
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
inline int na_box_blocks_1d(int extent, NaAxis a, int key_block) {
  return (extent + a.k - 2 + key_block - 1) / key_block + 1;
}

/// `g` with runs of consecutive 1-D tiles (NaGrid::run), so that about
/// `resident` threadgroups (as many as the device holds at once) cover the
/// `batch_heads` (batch x heads) grids; `run_override` > 0 forces the run
/// length (tests). Runs need a box of at most stages - 1 blocks (the ring
/// keeps one stage for the next tile's copies); otherwise, for more than one
/// axis, or where a run would be one tile, `g` stays as it is.
inline NaGrid na_run_for(
    NaGrid g,
    const NaAxis* axes,
    int n_axes,
    int key_block,
    int stages,
    stride_t batch_heads,
    stride_t resident,
    int run_override) {
  if (n_axes != 1 ||
      na_box_blocks_1d(g.extent[0], axes[0], key_block) > stages - 1) {
    return g;
  }
  stride_t run = run_override;
  if (run <= 0) {
    const stride_t tiles = batch_heads * g.blocks;
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
