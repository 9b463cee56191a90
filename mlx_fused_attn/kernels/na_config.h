// Compile-time choices of the neighborhood-attention GPU kernel, shared by
// the host dispatch, the instantiation lists and the kernels' static_asserts:
// which head dims and axis counts have a kernel, the tiles each runs with,
// and the threadgroup memory that follows from them.
#pragma once

#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/tile/target.h"

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

/// The one tile chooser of the neighborhood kernel (AttnTiles: bq query rows
/// per threadgroup, bk keys per K/V block, warps, stages), per head dim,
/// dtype, backend and number of spatial axes.
///
/// A warp's query rows run along the fastest spatial axis and its warps
/// spread over the others, so more warps make a 2-D or 3-D query tile more
/// compact, and a compact tile shares more of its keys: the keys a tile
/// visits are the union of its queries' windows, (e_y + k - 1)(e_x + k - 1)
/// for a tile of e_y x e_x queries and a k x k kernel. A key box of at most
/// `stages` blocks is resident (na_attention.h: all its copies start at
/// once, behind one barrier); a longer one streams through a ring.
///
/// CUDA, 16-bit, D <= 64, from benchmarks/cuda_na_sweep.cu on an H200 (H =
/// 16, D = 64, fp16; benchmarks/RESULTS.md). The kernel is bound by
/// instruction latency at 4 warps a scheduler (ncu: about half the issue
/// slots and 45% of DRAM bandwidth used), so small threadgroups, four a
/// multiprocessor (the register and shared-memory limits), win: one's loads
/// and barriers overlap another's math, though each key is then read by
/// more tiles (through L2).
/// - 1-D: 4 warps of 16 rows (one m16n8k16 fragment), 32-key blocks, six
///   stages: with runs of tiles (NaGrid::run, na_use_runs; one round of
///   threadgroups, eight tiles each at L = 16384, H = 16) the keys stream
///   through a ring of six blocks, a box of up to five (64 + k - 1 keys at
///   worst alignment: k <= 65) beside the next tile's copies; shorter
///   inputs get a tile a threadgroup with the box resident. L = 16384,
///   kernel alone (CUDA events, 20 launches): 51.7 us at k = 7 and 60.2 at
///   k = 63 with runs, 50.0 and 63.3 a tile a threadgroup, 55.0 and 64.5
///   with runs for two rounds, 49.8 and 61.6 three threadgroups a
///   multiprocessor, 50.0 and 66.1 for 2 warps, 57.8 and 67.8 for 8 warps
///   (through the op, CUPTI: 48.2 and 59.0 us). Before the runs and the
///   reciprocal in na_finalize: 57.7 and 71.8 us for these tiles with four
///   stages.
/// - 2-D: 4 warps, 64-key blocks (per-block costs, the barrier, row
///   reductions and O rescale, over twice the products), three stages. 128
///   x 128: 120 us for 7 x 7 and 193 us for 13 x 13, against 127 and 201
///   for 8 warps and 64-key blocks, 140 and 227 for 8 warps and 32-key
///   blocks (the tiles before); 112.8 and 184.9 us with na_finalize's
///   reciprocal (8 warps: 123.8 and 196.8).
/// - 3-D: 8 warps of 16 rows, 32-key blocks, three stages, two
///   threadgroups a multiprocessor (the tiles before; not swept).
/// At D = 128, 8 warps and 32-key blocks, one threadgroup a multiprocessor
/// (two would spill 128 bytes a thread under the 128-register cap), with six
/// stages in 1-D (resident boxes up to k = 65, as at D = 64; not swept; no
/// runs of tiles, which are not measured there) and three otherwise. fp32 (3xTF32 products, registers twice as wide): 4
/// warps and 32-key blocks in two stages, as the main kernel, two blocks a
/// multiprocessor without a cap.
///
/// Metal: 8 simdgroups of 8 rows (an 8 x 8 query tile in 2-D), 32-key
/// blocks, 16 at D = 128 (fp32 K and V blocks then take 2 * 16 * 132 * 4 B
/// = 16.5 KB of the 32 KB of threadgroup memory); plain loads, one stage.
constexpr AttnTiles
choose_na_tiles(int head_dim, DType dtype, Backend backend, int n_axes) {
  if (backend == Backend::Metal) {
    return AttnTiles{64, head_dim < 128 ? 32 : 16, 8, 1};
  }
  if (dtype == DType::Float32) {
    return AttnTiles{64, 32, 4, 2};
  }
  if (head_dim > 64) {
    return AttnTiles{128, 32, 8, n_axes == 1 ? 6 : 3, 1};
  }
  if (n_axes == 1) {
    return AttnTiles{64, 32, 4, 6, 4};
  }
  if (n_axes == 2) {
    return AttnTiles{64, 64, 4, 3, 4};
  }
  return AttnTiles{128, 32, 8, 3, 2};
}

/// Whether the CUDA host gives 1-D threadgroups runs of tiles where the
/// input is large enough (NaGrid::run, na_run_for): where measured, 16-bit
/// at D <= 64 (benchmarks/RESULTS.md). Elsewhere (D = 128: one 8-warp
/// threadgroup a multiprocessor; fp32: two stages) runs stay off unless
/// MLX_FUSED_ATTN_NA_RUN forces them (tests).
constexpr bool
na_use_runs(int head_dim, DType dtype, Backend backend, int n_axes) {
  return backend == Backend::Cuda && n_axes == 1 &&
      dtype != DType::Float32 && head_dim <= 64;
}

/// Key coordinates (one int per axis in use and key of a K/V block, every
/// stage) that the key gather leaves for the mask; 1-D needs none, its key
/// index is its coordinate.
constexpr int na_coord_ints(AttnTiles tiles, int n_axes) {
  return n_axes > 1 ? tiles.stages * n_axes * tiles.bk : 0;
}

/// Threadgroup memory of one kernel instance: K and V blocks for every stage
/// (rows padded by 16 bytes, as AttnShape::kSmemLd) and the key coordinates.
constexpr int
na_smem_bytes(AttnTiles tiles, int head_dim, DType dtype, int n_axes) {
  return attention_smem_bytes(
             tiles, head_dim, head_dim, dtype, Backend::Cuda) +
      4 * na_coord_ints(tiles, n_axes);
}

} // namespace fa
