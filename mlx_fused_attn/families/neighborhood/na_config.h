// Compile-time choices of the neighborhood-attention GPU kernel, shared by
// the host dispatch, the instantiation lists and the kernels' static_asserts:
// which head dims and axis counts have a kernel, the tiles each runs with,
// and the threadgroup memory that follows from them.
#pragma once

#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/tile/platform.h"

namespace fa {

/// The head dims with a neighborhood kernel (q, k and v share one), as an
/// X-macro for the instantiation lists and the host's checks. Every head dim
/// costs 3 dtypes x 3 axis counts = 9 kernels on each backend, so the list
/// holds the head dims of the NATTEN-style models (32, 64, 128); others run
/// as plain MLX ops.
#define FA_NA_HEAD_DIMS(X) X(32) X(64) X(128)

/// The spatial axis counts (na1d, na2d, na3d): a template parameter of the
/// kernel, so that the mask and the key gather handle only the axes in use.
#define FA_NA_AXES(X) X(1) X(2) X(3)

constexpr bool na_head_dim_supported(int head_dim) {
#define FA_NA_HEAD_DIM_EQUALS(d) head_dim == d ||
  return FA_NA_HEAD_DIMS(FA_NA_HEAD_DIM_EQUALS) false;
#undef FA_NA_HEAD_DIM_EQUALS
}

/// The tiles of a neighborhood kernel. A query tile is not a block of rows:
/// each warp holds `warp_rows` queries along the fastest spatial axis, and
/// the host spreads the warps over the axes (NaGrid::warps), so the tile's
/// shape is chosen per call from the spatial extents.
struct NaTiles {
  int warp_rows; ///< queries of one warp, consecutive along the fastest axis
  int key_block; ///< keys per K/V block gathered from the tile's windows
  int warps; ///< simdgroups (warps) per threadgroup
  /// K/V blocks in threadgroup memory: a tile's key box of at most `stages`
  /// blocks is resident, a longer one streams through them as a ring.
  int stages;
  /// CUDA: blocks a multiprocessor must hold at once (__launch_bounds__);
  /// Metal ignores it.
  int min_blocks = 1;
};

constexpr bool operator==(NaTiles a, NaTiles b) {
  return a.warp_rows == b.warp_rows && a.key_block == b.key_block &&
      a.warps == b.warps && a.stages == b.stages &&
      a.min_blocks == b.min_blocks;
}

/// Queries of one tile, the kernels' template parameter BQ (AttnShape::kBQ).
constexpr int na_tile_queries(NaTiles tiles) {
  return tiles.warp_rows * tiles.warps;
}

/// The one tile chooser of the neighborhood kernel, per head dim, dtype,
/// backend and number of spatial axes (docs/gpu_kernels.md, "Why these
/// tiles"). More warps make a 2-D or 3-D tile more compact, so its queries'
/// windows share more keys; fewer make smaller threadgroups, more of which
/// share a multiprocessor and cover one another's waits.
constexpr NaTiles
choose_na_tiles(int head_dim, DType dtype, Backend backend, int n_axes) {
  // 8 x 8 queries in 2-D; plain loads, one stage; 16-key blocks at D = 128
  // keep fp32 K and V within 32 KB.
  if (backend == Backend::Metal) {
    return NaTiles{8, head_dim < 128 ? 32 : 16, 8, 1};
  }
  // 3xTF32 registers are twice as wide: the main kernel's tiles.
  if (dtype == DType::Float32) {
    return NaTiles{16, 32, 4, 2};
  }
  // One 8-warp block a multiprocessor: two would spill under their register
  // cap. Six 1-D stages keep boxes up to k = 65 resident, as at D = 64.
  if (head_dim > 64) {
    return NaTiles{16, 32, 8, n_axes == 1 ? 6 : 3, 1};
  }
  // The kernel is latency-bound: four small blocks a multiprocessor; a ring
  // of six 32-key blocks holds a box of five beside the next tile's copies.
  if (n_axes == 1) {
    return NaTiles{16, 32, 4, 6, 4};
  }
  // 64-key blocks spread the per-block costs (barrier, row reductions, O
  // rescale) over twice the products.
  if (n_axes == 2) {
    return NaTiles{16, 64, 4, 3, 4};
  }
  // 8 warps keep the 3-D tile compact, two blocks a multiprocessor (not swept).
  return NaTiles{16, 32, 8, 3, 2};
}

/// Whether the CUDA host gives 1-D threadgroups runs of tiles where the
/// input is large enough (NaGrid::run, na_run_for): where measured, 16-bit
/// at D <= 64. Elsewhere runs stay off unless MLX_FUSED_ATTN_NA_RUN forces
/// them (tests).
constexpr bool
na_use_runs(int head_dim, DType dtype, Backend backend, int n_axes) {
  return backend == Backend::Cuda && n_axes == 1 &&
      dtype != DType::Float32 && head_dim <= 64;
}

/// Key coordinates (one int per axis in use and key of a K/V block, every
/// stage) that the key gather leaves for the mask; 1-D needs none, its key
/// index is its coordinate.
constexpr int na_coord_ints(NaTiles tiles, int n_axes) {
  return n_axes > 1 ? tiles.stages * n_axes * tiles.key_block : 0;
}

/// Threadgroup memory of one kernel instance: K and V blocks for every stage
/// (laid out as the general kernel's, AttnShape) and the key coordinates.
constexpr int
na_smem_bytes(NaTiles tiles, int head_dim, DType dtype, int n_axes) {
  const AttnTiles blocks = {
      na_tile_queries(tiles), tiles.key_block, tiles.warps, tiles.stages};
  return attention_smem_bytes(
             blocks, head_dim, head_dim, dtype, Backend::Cuda) +
      4 * na_coord_ints(tiles, n_axes);
}

} // namespace fa
