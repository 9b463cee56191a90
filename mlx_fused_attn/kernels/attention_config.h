// Compile-time choices of the attention kernel, shared by the host dispatch,
// the instantiation lists and the kernels' static_asserts: which head dims
// exist and which tiles each (head dim, dtype, backend) runs with.
#pragma once

#include "mlx_fused_attn/tile/platform.h"

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
  /// CUDA sm_90a, with wgmma and q_shared: a producer warpgroup, besides
  /// the `warps` that do the math, copies K and V by TMA into a ring of
  /// `stages` (tile/kv_tma_ring.h) and gives its registers to the others.
  bool producer = false;
  /// CUDA sm_90a, with a producer: a persistent grid, a block or
  /// min_blocks a multiprocessor, each walking its share of the work tiles
  /// (kernels/cuda/persistent_scheduler.cuh), so that the producer copies
  /// a tile's first K/V blocks under the previous tile's last products and
  /// its store. Not a shape: the plan sets it after choosing the tiles
  /// (plan/persistent_grid.h).
  bool persistent = false;
  /// CUDA, without a producer: the kernel's last split merges the splits'
  /// partials (kernels/cuda/split_merge.cuh). An instance of its own: that
  /// code, carried by every instance, moved ptxas's register allocation and
  /// schedule of the key loop where it never ran (fp32 D = 128 and fp16
  /// D = 80 2-3% slower on the H100). The producer kernel always carries
  /// the merge. Not a shape: the plan sets it with the key splits.
  bool split_merge = false;
  /// CUDA, mma.sync with Q in registers: the warps share the threadgroup's
  /// bq rows and split each key block's keys, their softmaxes merged at the
  /// end (kernels/key_slices.h): decode's packed rows, one warp's worth,
  /// run their products on every scheduler of a multiprocessor.
  bool key_slices = false;
};

constexpr bool operator==(AttnTiles a, AttnTiles b) {
  return a.bq == b.bq && a.bk == b.bk && a.warps == b.warps &&
      a.stages == b.stages && a.min_blocks == b.min_blocks &&
      a.wgmma == b.wgmma && a.q_shared == b.q_shared &&
      a.producer == b.producer && a.persistent == b.persistent &&
      a.split_merge == b.split_merge && a.key_slices == b.key_slices;
}

/// The producer's warps (one warpgroup) and its barriers' threadgroup
/// memory (tile/kv_tma_ring.h's kKVTmaSyncBytes, which keeps Q after them
/// 1024-byte aligned). Enumerators, as platform.h's: Metal rejects a
/// program-scope variable outside the `constant` address space.
enum { kProducerWarps = 4, kProducerSyncBytes = 1024 };

/// Warps a threadgroup of `tiles` launches with: the math's and the
/// producer's.
constexpr int attention_launch_warps(AttnTiles tiles) {
  return tiles.warps + (tiles.producer ? kProducerWarps : 0);
}

/// The columns a head dim takes in the products and in threadgroup memory
/// on `backend`: whole fragments (platform.h), the columns past the head dim
/// zero. Of the head dims below only 72 on CUDA pads (to 80).
constexpr int attention_padded_head_dim(int head_dim, Backend backend) {
  return round_up(head_dim, fragment_size(backend));
}

/// Threadgroup memory of one kernel instance: K blocks (head dim
/// `head_dim`) and V blocks (`head_dim_v`) for every stage, then Q where it
/// is kept there, after the producer's barriers where it has one; padded
/// blocks and Q add 16 bytes a row (tile/padded_block.h,
/// tile/q_in_padded_shared.h), swizzled ones none. The CUDA kernels align
/// the start to 1024 bytes.
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
      (tiles.q_shared ? tiles.bq * (k_cols * dtype_size(dtype) + row_pad) : 0) +
      (tiles.producer ? kProducerSyncBytes : 0);
}

/// CUDA: whether an instance asks the driver for all of L1 as shared
/// memory (CU_SHAREDMEM_CARVEOUT_MAX_SHARED): where min_blocks of it fit
/// only so, more than two blocks, or two producer blocks
/// (choose_small_grid_tiles), which fill the 228 KB. Left to itself the
/// driver may choose a split that holds fewer.
constexpr bool attention_prefers_max_shared(AttnTiles tiles) {
  return tiles.min_blocks > 2 || (tiles.producer && tiles.min_blocks > 1);
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

/// CUDA tiles past D = 128: one warpgroup of 64 queries, 16 rows a warp,
/// since a warp's O alone is D_v / 2 fp32 registers a thread; each variant
/// chosen not to spill (ptxas -v) within the 163 KB an A100 block may have.
constexpr AttnTiles choose_large_head_dim_tiles(
    int head_dim,
    DType dtype,
    bool wgmma) {
  // Q in shared memory frees the registers for 2 blocks a multiprocessor.
  if (wgmma && dtype != DType::Float32) {
    return AttnTiles{64, 64, 4, 1, 2, true, true};
  }
  // 3xTF32 spills with Q in registers; at D = 256 two stages would need 200 KB.
  if (dtype == DType::Float32) {
    return head_dim == 256 ? AttnTiles{64, 32, 4, 1, 1, false, true}
                           : AttnTiles{64, 32, 4, 2, 1, false, true};
  }
  // Q in registers spills at D = 256 only, so only there it moves to shared.
  return head_dim == 256 ? AttnTiles{64, 32, 4, 2, 1, false, true}
                         : AttnTiles{64, 64, 4, 2, 2};
}

/// A variant of the Metal kernel to time against the default (the host
/// reads it from MLX_FUSED_ATTN_METAL_VARIANT, backend/metal/
/// attention_variant.h; benchmarks/sdpa_bench.py --metal-variants). The
/// default value is the default kernel. Q's place and the key block size
/// are tiles: each sizes threadgroup arrays and register tiles, which a
/// function constant cannot, so they are instances of their own
/// (metal_variant_tiles says which exist); stride32 is a function constant
/// of every instance (attention_features.h).
struct MetalAttnVariant {
  /// Q in threadgroup memory, read a k step at a time
  /// (tile/q_in_padded_shared.h), instead of each simdgroup's registers.
  bool q_threadgroup = false;
  int bk = 0; ///< keys per K/V block: 16 or 32, or 0 for the chooser's
  bool stride32 = false; ///< the feature stride32
};

/// The head dim (of q, k and v alike) at which the tile variants have
/// instances, in 16-bit dtypes: the largest head dim of common models, where
/// Q's registers (an fp32 fragment a lane holds two of: 32 a lane at D = 128)
/// and the key block's size weigh most.
enum { kMetalVariantHeadDim = 128 };

/// `tiles` (Metal's default for the head dims and dtype) as `variant` asks,
/// where that variant has an instance: at D = D_v = kMetalVariantHeadDim in
/// float16 and bfloat16, within Metal's threadgroup memory (float32 fits
/// neither 32-key blocks nor Q beside 16-key ones). Elsewhere, `tiles`.
constexpr AttnTiles metal_variant_tiles(
    AttnTiles tiles,
    int head_dim,
    int head_dim_v,
    DType dtype,
    MetalAttnVariant variant) {
  if (head_dim != kMetalVariantHeadDim || head_dim_v != kMetalVariantHeadDim ||
      dtype == DType::Float32) {
    return tiles;
  }
  AttnTiles v = tiles;
  v.q_shared = variant.q_threadgroup;
  v.bk = variant.bk == 0 ? tiles.bk : variant.bk;
  return attention_smem_bytes(v, head_dim, head_dim_v, dtype, Backend::Metal) <=
          kMetalMaxThreadgroupBytes
      ? v
      : tiles;
}

/// The one tile chooser; docs/gpu_kernels.md ("Why these tiles") gives the
/// measurements behind each branch. No branch depends on causal: on Metal
/// causal is a function-constant variant of the same pipeline, and on CUDA
/// the causal runs of the sweeps rank the tiles the same.
///
/// `wgmma`: Hopper (sm_90) with kernels built for sm_90a, where 16-bit
/// kernels take warpgroup products. `large_grid`: the grid holds more query
/// blocks than one wave of the tiles chosen without it (the host decides,
/// attention_planner.cpp). `metal_variant`: on Metal, a variant to time
/// (metal_variant_tiles).
constexpr AttnTiles choose_attention_tiles(
    int head_dim,
    int head_dim_v,
    DType dtype,
    Backend backend,
    bool wgmma,
    bool large_grid = false,
    MetalAttnVariant metal_variant = MetalAttnVariant{}) {
  if (backend == Backend::Metal) {
    // MLX steel's shapes on the same GPUs; bk halves until K and V fit 32 KB.
    AttnTiles tiles = {32, head_dim < 128 ? 32 : 16, 4};
    while (attention_smem_bytes(tiles, head_dim, head_dim_v, dtype, backend) >
           kMetalMaxThreadgroupBytes) {
      tiles.bk /= 2;
    }
    return metal_variant_tiles(
        tiles, head_dim, head_dim_v, dtype, metal_variant);
  }
  // D = 72 runs as 80 (whole k16 steps, zeros past it) and takes its tiles.
  const int d = attention_padded_head_dim(head_dim, backend);
  if (d > 128) {
    return choose_large_head_dim_tiles(d, dtype, wgmma);
  }
  // 3xTF32 registers are twice as wide: 16 rows a warp, 32-key blocks.
  if (dtype == DType::Float32) {
    return AttnTiles{64, 32, 4, 2};
  }
  // Past one wave, FlashAttention-3's split: a producer warpgroup copies
  // 128-key blocks by TMA into three stages for two warpgroups of 64
  // queries, each block's S issued with the previous one's P V: 3-18%
  // faster than four independent 64-query blocks (causal included); within
  // one wave, 128-key blocks halve the waits of each block.
  if (wgmma && d == 128) {
    return large_grid ? AttnTiles{128, 128, 8, 3, 1, true, true, true}
                      : AttnTiles{64, 128, 4, 1, 2, true, true};
  }
  // Past one wave at D = 96, two warpgroups share each K/V block.
  if (wgmma && large_grid && d == 96) {
    return AttnTiles{128, 64, 8, 1, 2, true, true};
  }
  // One warpgroup a block (128 keys up to D = 64), as many blocks a
  // multiprocessor as fit without harmful spills (72's spill at 4 unmeasured).
  if (wgmma) {
    const int bk = d <= 64 ? 128 : 64;
    const int min_blocks = head_dim == 80 ? 4 : head_dim == 96 ? 2 : 3;
    return AttnTiles{64, bk, 4, 2, min_blocks, true};
  }
  // mma.sync at D = 128 is latency-bound: 3 blocks a multiprocessor
  // (registers capped at 168) overlap one's softmax with another's products.
  if (d == 128) {
    return AttnTiles{64, 64, 4, 2, 3};
  }
  // Up to D = 96, 32 rows a warp; D = 96 measured best with 32-key blocks.
  return d == 96 ? AttnTiles{128, 32, 4, 2} : AttnTiles{128, 64, 4, 2};
}

/// CUDA sm_90a's candidate tiles for small grids (issue 46), where the
/// plan takes them (attention_planning.cpp, behind
/// MLX_FUSED_ATTN_SMALL_GRID_PRODUCER): the producer warpgroup for one math
/// warpgroup of 64 queries, two threadgroups a multiprocessor. A short
/// grid's tiles are few key blocks long, and each pays a fixed cost
/// outside its key loop (prologue, Q's copy, the first softmax, the last
/// P V, the stores: benchmarks/tile_cost.py) that the
/// 128-query tiles' two warpgroups pay at the same time while the tensor
/// cores wait; here the other threadgroup's products run under it, and
/// 64-query tiles make twice the tiles to share the multiprocessors. Three
/// stages, as the overlapped steps need (docs/gpu_kernels.md); at D = 128
/// that makes 64-key blocks (113 KB, two of which fill a multiprocessor's
/// 228 KB), at D = 64 128-key ones. The producer copies whole 128-byte
/// panels by TMA, so only head dims of whole panels (64, 128) in 16 bits
/// have them; `has_small_grid_tiles` says where.
constexpr bool has_small_grid_tiles(
    int head_dim,
    int head_dim_v,
    DType dtype,
    Backend backend,
    bool wgmma) {
  return backend == Backend::Cuda && wgmma && dtype != DType::Float32 &&
      head_dim == head_dim_v && (head_dim == 64 || head_dim == 128);
}

/// The small-grid tiles of a head dim that has them.
constexpr AttnTiles choose_small_grid_tiles(int head_dim) {
  return head_dim == 64 ? AttnTiles{64, 128, 4, 3, 2, true, true, true}
                        : AttnTiles{64, 64, 4, 3, 2, true, true, true};
}

} // namespace fa
