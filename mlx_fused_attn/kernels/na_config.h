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
/// per threadgroup, bk keys per K/V block, warps, stages).
///
/// A warp's query rows run along the fastest spatial axis and its warps
/// spread over the others, so more warps make a 2-D or 3-D query tile more
/// compact, and a compact tile shares more of its keys: the keys a tile
/// visits are the union of its queries' windows, (e_y + k - 1)(e_x + k - 1)
/// for a tile of e_y x e_x queries and a k x k kernel.
///
/// CUDA: 8 warps of 16 rows (one m16n8k16 fragment): a 2-D tile of 8 x 16
/// queries visits 14 x 22 keys for 7 x 7 (2.4 keys a query), where 4 warps
/// of 32 rows (4 x 32) would visit 10 x 38 (3.0). 32-key blocks: a warp
/// computes only the blocks its own windows reach, and in 1-D (16 rows, so
/// 16 + k - 1 keys) 64-key blocks would make it compute 2.0x the keys it
/// needs for k = 63 and 11x for k = 7, against 1.5x and 6.9x with 32 (the
/// main kernel's sweep found 64-key blocks only 7% faster than 32 on dense
/// attention). Three stages keep two blocks' copies in flight under the
/// math. 1-D takes six: a 1-D tile visits 128 + k - 1 keys, so up to
/// k = 65 its whole key box is resident (na_attention.h: every copy starts
/// at once, behind one barrier), where a ring of three left the tile
/// waiting on one block after another (benchmarks/cuda_na_sweep.cu, H200,
/// L = 16384 H = 16 D = 64 fp16: 74.5 -> 61.8 us for k = 7, 85.1 -> 75.8
/// us for k = 63; eight stages were no faster). Two blocks a multiprocessor (min_blocks) for 16-bit
/// types up to D = 64, so that one block's barriers and first loads overlap
/// the other's math: ptxas (sm_90) then fits them in 128 registers with at
/// most 4 bytes of spill (unconstrained it takes up to 137, one 8-warp block
/// a multiprocessor); D = 128 would spill 128 bytes a thread. fp32 (3xTF32
/// products, registers twice as wide): 4 warps and 32-key blocks in two
/// stages, as the main kernel, two blocks a multiprocessor without a cap.
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
  const int min_blocks = head_dim <= 64 ? 2 : 1;
  if (n_axes == 1) {
    return AttnTiles{128, 32, 8, 6, min_blocks};
  }
  return AttnTiles{128, 32, 8, 3, min_blocks};
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
  return attention_smem_bytes(tiles, head_dim, dtype) +
      4 * na_coord_ints(tiles, n_axes);
}

} // namespace fa
