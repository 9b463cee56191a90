// Compile-time choices of the fused attention backward (attention_backward.h),
// shared by the host dispatch, the instantiation lists and the kernels'
// static_asserts: which head dims it covers and the tiles of its kernels.
#pragma once

#include "mlx_fused_attn/kernels/attention_config.h"

namespace fa {

/// The backward covers equal head dims of q, k and v among these.
#define FA_ATTENTION_BACKWARD_HEAD_DIMS(X) X(32) X(64) X(96) X(128)

/// Warps of a threadgroup of the row-dot kernel (D = rowsum(dO * O)), one
/// row a warp.
constexpr int kBwdRowDotWarps = 4;

constexpr bool attention_backward_head_dims_supported(
    int head_dim,
    int head_dim_v) {
  return head_dim == head_dim_v &&
      (head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128);
}

/// Threadgroup memory of either backward kernel: two streamed blocks (Q and
/// dO, or K and V) of bk rows a stage, rows padded by 16 bytes.
constexpr int attention_backward_smem_bytes(
    AttnTiles tiles,
    int head_dim,
    DType dtype,
    Backend backend) {
  return tiles.stages * 2 * tiles.bk *
      (attention_padded_head_dim(head_dim, backend) * dtype_size(dtype) + 16);
}

/// The shared memory a CUDA backward block may ask for: 16-bit kernels up to
/// an A100's opt-in limit (163 KB; the host raises each kernel's limit,
/// cuda::load_kernel), fp32 ones within the default 48 KB, since 64-row
/// blocks would add a third to their spills (ptxas, D = 128 dK/dV: 2.7 to
/// 3.7 KB a thread) and pass the 99 KB of sm_86 and sm_89.
constexpr int cuda_backward_smem_limit(DType dtype) {
  return dtype == DType::Float32 ? 48 * 1024 : 163 * 1024;
}

/// Both backward kernels run one tile shape: bq rows owned by a threadgroup
/// (its keys in the dK/dV kernel, its queries in the dQ kernel), bk rows a
/// streamed block. A warp owns one fragment row of 8 (Metal) or 16 (CUDA),
/// so that the kernel holding two operands and two fp32 accumulators of a
/// full head dim stays within registers. The streamed block starts at
/// Metal's 64 rows, with one stage in its 32 KB (plain loads); on CUDA, with
/// two stages (cp.async: block i + 1 lands under block i's products; the
/// backward reads both of a stage's blocks after they land, which a
/// staggered single stage would not allow), at the H200 sweep's best
/// (cuda_bwd_bench sweep): 128 rows up to D = 64, and 32 past it, where
/// the dK/dV kernel sits at 255 registers and larger blocks spill (64 rows:
/// 3% slower, 15% causal). It halves until the stages fit the limit.
constexpr AttnTiles choose_attention_backward_tiles(
    int head_dim,
    DType dtype,
    Backend backend) {
  const int warps = 4;
  const int rows = warps * fragment_size(backend);
  const int stages = backend == Backend::Metal ? 1 : 2;
  const int limit = backend == Backend::Metal ? kMetalMaxThreadgroupBytes
                                              : cuda_backward_smem_limit(dtype);
  int bk = backend == Backend::Metal
      ? 64
      : (attention_padded_head_dim(head_dim, backend) <= 64 ? 128 : 32);
  while (bk > 8 &&
         attention_backward_smem_bytes(
             AttnTiles{rows, bk, warps, stages}, head_dim, dtype, backend) >
             limit) {
    bk /= 2;
  }
  return AttnTiles{rows, bk, warps, stages};
}

} // namespace fa
