// Compile-time choices of the attention kernel, shared by the host dispatch,
// the instantiation lists and the kernels' static_asserts: which head dims
// exist and which tiles each (head dim, dtype, backend, causal) runs with.
#pragma once

#include "mlx_fused_attn/tile/target.h"

namespace fa {

struct AttnTiles {
  int bq; ///< query rows per threadgroup (block)
  int bk; ///< keys per streamed K/V block
  int warps; ///< simdgroups (warps) per threadgroup; each owns bq / warps rows
  /// K/V blocks resident in threadgroup memory: with s > 1 the loads of
  /// block i + s - 1 run while block i is computed (asynchronous copies).
  int stages = 1;
  /// CUDA: blocks a multiprocessor must be able to hold at once, the second
  /// argument of __launch_bounds__; it caps registers at 64K / (blocks x
  /// threads). Metal ignores it.
  int min_blocks = 1;
  /// CUDA sm_90a: the products are Hopper's warpgroup products (wgmma) on
  /// swizzled K/V blocks (tile/swizzled_block.h) instead of each warp's
  /// mma.sync on padded ones. Needs 16 rows a warp and whole warpgroups.
  bool wgmma = false;
  /// CUDA: Q is read by the products from shared memory instead of
  /// registers, which frees Q's registers (32 a thread at D = 128): with
  /// wgmma for more blocks a multiprocessor (tile/q_in_shared.h), with
  /// mma.sync a k step at a time where Q and O would not fit together
  /// (tile/q_in_padded_shared.h).
  bool q_shared = false;
};

constexpr bool operator==(AttnTiles a, AttnTiles b) {
  return a.bq == b.bq && a.bk == b.bk && a.warps == b.warps &&
      a.stages == b.stages && a.min_blocks == b.min_blocks &&
      a.wgmma == b.wgmma && a.q_shared == b.q_shared;
}

/// The columns a head dim takes in the products and in threadgroup memory
/// on `backend`: whole fragments (target.h), the columns past the head dim
/// zero. Of the head dims below only 72 on CUDA pads (to 80).
constexpr int attention_padded_head_dim(int head_dim, Backend backend) {
  return round_up(head_dim, fragment_size(backend));
}

/// Threadgroup memory of one kernel instance: K blocks (head dim
/// `head_dim`) and V blocks (`head_dim_v`) for every stage, then Q where it
/// is kept there; padded blocks and Q add 16 bytes a row
/// (tile/padded_block.h, tile/q_in_padded_shared.h), swizzled ones none.
/// The CUDA kernels align the start to 1024 bytes.
constexpr int attention_smem_bytes(
    AttnTiles tiles,
    int head_dim,
    int head_dim_v,
    DType dtype,
    Backend backend) {
  const int k_cols = attention_padded_head_dim(head_dim, backend);
  const int v_cols = attention_padded_head_dim(head_dim_v, backend);
  const int row_pad = tiles.wgmma ? 0 : 16;
  return tiles.stages * tiles.bk *
      ((k_cols + v_cols) * dtype_size(dtype) + 2 * row_pad) +
      (tiles.q_shared ? tiles.bq * (k_cols * dtype_size(dtype) + row_pad) : 0);
}

/// The head dims with a kernel, as (q and k, v) pairs in an X-macro: the
/// CUDA build compiles one object per entry (cmake/cuda.cmake reads this
/// macro) and the host dispatch switches over it. Besides q, k and v of one
/// head dim, DeepSeek's multi-head latent attention: q and k 192, v 128.
#define FA_ATTENTION_HEAD_DIMS(X)                                          \
  X(32, 32) X(64, 64) X(72, 72) X(80, 80) X(96, 96) X(128, 128) X(192, 128) \
      X(192, 192) X(256, 256)

constexpr bool attention_head_dims_supported(int head_dim, int head_dim_v) {
#define FA_HEAD_DIMS_EQUAL(d, dv) (head_dim == d && head_dim_v == dv) ||
  return FA_ATTENTION_HEAD_DIMS(FA_HEAD_DIMS_EQUAL) false;
#undef FA_HEAD_DIMS_EQUAL
}

/// CUDA tiles past D = 128 (192, 256, and 192 for q and k with 128 for v),
/// not yet measured: chosen so that no variant spills (ptxas -v, CUDA 13.0,
/// sm_80 and sm_90a images), with one warpgroup of 64 queries, 16 rows a
/// warp, since a warp's O accumulator alone is D_v / 2 fp32 registers a
/// thread (128 at D_v = 256). Shared memory stays within the 163 KB an A100
/// block may have.
/// - Hopper (wgmma), all three: Q in shared memory, one staggered buffer
///   each for 64 keys of K and V, 2 blocks a multiprocessor (188-212
///   registers at v 128, 224-240 at 192, 254-255 at 256; 96 KB at 256):
///   with Q in registers and two stages D = 192's array-mask variant spilled
///   40 bytes.
/// - mma.sync, 16-bit, D = 192 with v 192 or 128: Q in registers, two stages
///   of 64 keys (242-255 registers; 100 KB at v 192).
/// - mma.sync, 16-bit, D = 256: Q in shared memory read a k step at a time,
///   two stages of 32 keys (236-246 registers, 101 KB): with Q in registers
///   the sm_90a image spilled 8 bytes at 255 registers.
/// - fp32 (3xTF32): Q in shared memory a k step at a time (179-229
///   registers); with Q in registers D = 192 spilled 1.5 KB and D = 256 2.8
///   KB. Two stages of 32 keys at D = 192 (150 KB), one staggered at
///   D = 256 (133 KB; two stages would take 200 KB).
constexpr AttnTiles choose_large_head_dim_tiles(
    int head_dim,
    DType dtype,
    bool wgmma) {
  if (wgmma && dtype != DType::Float32) {
    return AttnTiles{64, 64, 4, 1, 2, true, true};
  }
  if (dtype == DType::Float32) {
    return head_dim == 256 ? AttnTiles{64, 32, 4, 1, 1, false, true}
                           : AttnTiles{64, 32, 4, 2, 1, false, true};
  }
  return head_dim == 256 ? AttnTiles{64, 32, 4, 2, 1, false, true}
                         : AttnTiles{64, 64, 4, 2, 2};
}

/// The one tile chooser.
///
/// Metal: 4 simdgroups of 8 query rows and 32-key blocks, bk = 16 from
/// D = 128: the shapes MLX's steel attention runs on the same GPUs. With K
/// and V blocks both resident, bk = 16 also keeps fp32 at D = 128 within
/// 32 KB of threadgroup memory (2 * 16 * (128 + 4) * 4 B = 16.5 KB; bk = 32
/// would need 33 KB), and is halved where it does not fit: fp32 at D = 256
/// takes 8 (2 * 16 * 260 * 4 B = 33.3 KB). Causal runs are function-constant
/// variants of the same pipeline, so on Metal the choice must not depend on
/// `causal`. Its loads are plain (synchronous) loads: one stage.
///
/// CUDA: two K/V stages (the next block's cp.async copies run under this
/// block's math) and 4 warps, so that two blocks share a multiprocessor and
/// one's softmax overlaps the other's products. Rows per warp and key block
/// measured on an H200 (benchmarks/cuda_tile_sweep.cu, 2026-11-29, bf16/fp16,
/// TFLOP/s): D = 128 takes 16 rows a warp and 64 keys (B=4 H=32 L=8192: 272
/// against 263 for 8 warps; B=1 L=512: 168 against 120 for 32 rows a warp
/// with 32 keys, which since the kernel's instruction cuts leads at L >= 1024
/// instead: 287 against 276 at B=4 L=8192, 295 against 264 causal, 35 us
/// against 26 at B=1 L=512); D = 96 takes 32 rows a warp and 32 keys (268 at
/// L=2048, against 258 with 64 keys and 216 with 16 rows a warp); D <= 80
/// takes 32 rows a warp and 64 keys (D=64 L=8192: 290 against 262 for 16
/// rows; D=80 L=2048: 239 against 197).
/// Shared memory at D = 128: 2 * 2 * 64 * (128 * 2 + 16) B = 68 KB.
///
/// min_blocks: D = 128 asks for 3 blocks a multiprocessor (registers capped
/// at 168, no spills; 3 x 68 KB of shared memory fits Hopper's 227 KB): 307
/// TFLOP/s against 275 with registers unbounded (220-255, 2 blocks) at B=4
/// L=8192 bf16, 296 against 263 causal, 967 us against 1060 at B=1 L=4096
/// fp16, same at L=512 (sweep of 2026-11-29). Nsight Compute had shown the
/// unbounded kernel latency-bound at 2 warps a scheduler (27% of issue
/// slots busy, tensor pipe 40%). The 32-row tiles of D <= 96 lost 4-14%
/// with 3 or 4 blocks, so they stay at 1.
///
/// fp32 (3xTF32 products, registers twice as wide): 4 warps of 16 rows and
/// 32-key blocks (31 TFLOP/s at D = 128, against 20 for 2 warps).
/// No choice depends on causal: the sweep's causal runs rank the same.
///
/// `wgmma`: the GPU is Hopper (sm_90) and the kernels were built for sm_90a,
/// so 16-bit kernels take warpgroup products: one warpgroup (4 warps of 16
/// rows: 64 queries) a block, K/V blocks in two stages, Q in registers
/// (D = 128 has since moved on: see large_grid below). Measured on an H200
/// (cuda_tile_sweep.cu -DFA_SWEEP_QUICK, 2026-11-29, TFLOP/s; see
/// benchmarks/RESULTS.md): D = 128 at 3 blocks a multiprocessor 536 at B=4
/// L=8192 bf16 (mma.sync 310; 2 blocks 448; 3 stages at 2 blocks 454; two
/// warpgroups of 128 queries 415, three of 192 492: more queries a block
/// read K and V from L2 less often, but lose the overlap of independent
/// blocks), 496 causal (295), 455 at B=1 L=4096 fp16 (283). Head dims up to
/// 64 take 128-key blocks: D = 64 452 against 426 with 64 keys at B=4
/// L=8192, 11.5 against 13.0 us at B=1 L=512. D = 80 fits 4 blocks a
/// multiprocessor (128 registers, 20 bytes of spill): 41.1 against 56.3 us
/// at B=1 L=1024 (512 query blocks: one wave of 4 x 132, 1.3 of 3 x 132),
/// 513 against 578 us at L=4096; D = 128 at 4 blocks (32-key blocks, to fit
/// shared memory) spills 144 bytes and serialises its products (992 against
/// 606 us at L=4096). D = 96 at 2 blocks 311 at L=2048 (mma.sync 264). A
/// software-pipelined loop (the softmax under the previous block's P V, as
/// FlashAttention-3 does) needs P twice in
/// registers: at 3 blocks the products serialise (ptxas C7512), at 2 it
/// reached 474 at B=4 L=8192; it was not kept.
///
/// `large_grid`: the grid holds more query blocks than one wave of the
/// tiles chosen without it (min_blocks x the multiprocessors; the host
/// decides, attention_cuda.cpp). With wgmma at D = 96 and 128 such a grid
/// takes Q in shared memory (q_shared) and one buffer each for K and V,
/// their copies staggered (attention.h): 64 + 2 x 64 keys x D x 2 B = 48 KB
/// at D = 128, so that 4 blocks (128 registers) share a multiprocessor and
/// cover one another's waits. H200, fp16 B=1 H=32 D=128, cuda_tile_sweep.cu,
/// 2026-11-29, the staggered copies against the same tiles loading K and V
/// together and against the default tiles, one run: L = 1024 45.0 us
/// against 46.4 and 58.8 (512 blocks: one wave of 4 x 132, 1.3 of 3 x 132),
/// L = 2048 151.9 against 157.8 and 177.0, L = 4096 552 against 573 and
/// 609; bf16 B=4 L=8192 552 TFLOP/s against 522 and 526, causal 512 against
/// 485 and 492. Two stages at 2 blocks (80 KB) lost everywhere (53.2 us at
/// L = 1024), as did two warpgroups (128 queries) sharing each K/V block at
/// 2 a multiprocessor (46.4). A grid of at most one wave at D = 128 takes
/// the same copies with 128-key blocks at 2 a multiprocessor (16 + 2 x 32
/// KB), whose block has half the iterations to wait through: L = 512 (256
/// blocks) 17.9-18.0 us against 19.1-19.2 for the tiles above it (Q in
/// registers, two stages, 3 blocks; 19.0 for the large-grid tiles; two
/// stages of 128 keys 24.4-24.7). D = 96 takes the two
/// warpgroups: 40.7 us at L = 1024 and 140.5 at 2048, against 42.0 and
/// 147.5 with one and 54.7 and 154.7 for the default tiles (17.3 at L = 512
/// all three). D <= 80 gain nothing from Q in shared memory (loading K and V
/// together: D = 64 30.8-33.1 against 31.6 us at L = 1024, 378-419 against
/// 338 at 4096; D = 80 40.2 against 40.9, 524 against 512).
constexpr AttnTiles choose_attention_tiles(
    int head_dim,
    int head_dim_v,
    DType dtype,
    Backend backend,
    bool /* causal */,
    bool wgmma,
    bool large_grid = false) {
  if (backend == Backend::Metal) {
    AttnTiles tiles = {32, head_dim < 128 ? 32 : 16, 4};
    while (attention_smem_bytes(tiles, head_dim, head_dim_v, dtype, backend) >
           kMetalMaxThreadgroupBytes) {
      tiles.bk /= 2;
    }
    return tiles;
  }
  // D = 72 runs as 80, zeros past it: the products, and so the tiles, of
  // 80, but for 3 blocks a multiprocessor with wgmma, where 4 (128
  // registers) spilled 60-128 bytes (D = 80 spills as much, measured
  // harmless there; 72 is not measured). Its fp32 kernel without a mask
  // spills 8 bytes in the sm_90a image (none in sm_80's).
  const int d = attention_padded_head_dim(head_dim, backend);
  if (d > 128) {
    return choose_large_head_dim_tiles(d, dtype, wgmma);
  }
  if (dtype == DType::Float32) {
    return AttnTiles{64, 32, 4, 2};
  }
  if (wgmma && d == 128) {
    return large_grid ? AttnTiles{64, 64, 4, 1, 4, true, true}
                      : AttnTiles{64, 128, 4, 1, 2, true, true};
  }
  if (wgmma && large_grid && d == 96) {
    return AttnTiles{128, 64, 8, 1, 2, true, true};
  }
  if (wgmma) {
    const int bk = d <= 64 ? 128 : 64;
    const int min_blocks = head_dim == 80 ? 4 : head_dim == 96 ? 2 : 3;
    return AttnTiles{64, bk, 4, 2, min_blocks, true};
  }
  if (d == 128) {
    return AttnTiles{64, 64, 4, 2, 3};
  }
  return d == 96 ? AttnTiles{128, 32, 4, 2} : AttnTiles{128, 64, 4, 2};
}

} // namespace fa
