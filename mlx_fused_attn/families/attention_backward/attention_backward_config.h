// Compile-time choices of the fused attention backward (attention_backward.h),
// shared by the host dispatch, the instantiation lists and the kernels'
// static_asserts: which head dims it covers and the tiles of its kernels.
#pragma once

#include "mlx_fused_attn/kernels/attention_config.h"

namespace fa {

/// The backward covers equal head dims of q, k and v among these.
#define FA_ATTENTION_BACKWARD_HEAD_DIMS(X) X(32) X(64) X(96) X(128)

/// Warps of a threadgroup of the row-dot kernel (D = rowsum(dO * O)), one
/// row a warp. An enumerator: Metal rejects a program-scope variable
/// outside the `constant` address space.
enum { kBwdRowDotWarps = 4 };

constexpr bool attention_backward_head_dims_supported(
    int head_dim,
    int head_dim_v) {
  return head_dim == head_dim_v &&
      (head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128);
}

/// Threadgroup memory of either backward kernel: two streamed blocks (Q and
/// dO, or K and V) of bk rows a stage, then, where the tiles keep them there
/// (q_shared), the two operands of the bq owned rows (K and V, or Q and dO);
/// rows padded by 16 bytes, the swizzled ones of warpgroup products not.
/// The one-kernel form's dK/dV kernel (dq_atomics,
/// attention_backward_dq_atomics.h) adds two bk x bq blocks of dS in padded
/// rows and, where K is not in shared memory already, a copy of its bq rows.
constexpr int attention_backward_smem_bytes(
    AttnTiles tiles,
    int head_dim,
    DType dtype,
    Backend backend,
    bool dq_atomics = false) {
  const int row_bytes =
      attention_padded_head_dim(head_dim, backend) * dtype_size(dtype) +
      (tiles.wgmma ? 0 : 16);
  const int dq_bytes = dq_atomics
      ? 2 * tiles.bk * (tiles.bq * dtype_size(dtype) + 16) +
          (tiles.q_shared ? 0 : tiles.bq * row_bytes)
      : 0;
  return 2 * row_bytes *
      (tiles.stages * tiles.bk + (tiles.q_shared ? tiles.bq : 0)) +
      dq_bytes;
}

/// The shared memory a CUDA backward block may ask for: 16-bit kernels up to
/// an A100's opt-in limit (163 KB; the host raises each kernel's limit,
/// cuda::load_kernel), fp32 ones within the default 48 KB, since 64-row
/// blocks would add a third to their spills (ptxas, D = 128 dK/dV: 2.7 to
/// 3.7 KB a thread) and pass the 99 KB of sm_86 and sm_89.
constexpr int cuda_backward_smem_limit(DType dtype) {
  return dtype == DType::Float32 ? 48 * 1024 : 163 * 1024;
}

/// Which kernel of the backward: the one over key blocks or over query
/// blocks.
enum class BwdKernel { DkDv, Dq };

/// The tiles of the backward's two kernels: bq rows owned by a threadgroup
/// (its keys in the dK/dV kernel, its queries in the dQ kernel), bk rows a
/// streamed block; and whether the dK/dV kernel accumulates dQ itself
/// (dq_atomics: the one-kernel form, CUDA only; then the dQ kernel's tiles
/// go unused).
struct AttnBwdTiles {
  AttnTiles dkdv;
  AttnTiles dq;
  bool dq_atomics = false;

  constexpr AttnTiles of(BwdKernel kernel) const {
    return kernel == BwdKernel::DkDv ? dkdv : dq;
  }
};

/// A warp owns one fragment row of 8 (Metal) or 16 (CUDA), so that a
/// kernel holding two operands and two fp32 accumulators of a full head dim
/// stays within registers. The tiles come from the H200 sweep
/// (cuda_bwd_bench sweep), where the two kernels differ:
///
/// - Hopper (`wgmma`, 16-bit): warpgroup products on streamed blocks of
///   128 rows up to D = 64 and 64 past it. The dK/dV kernel keeps K and V
///   in shared memory (in registers its products serialise), the dQ kernel
///   Q and dO there up to D = 64 and in registers past it. Whole backward
///   at D = 128, 4096 keys: 1849 us against 4332 with mma.sync; at D = 64,
///   1024 keys: 94 against 214.
/// - Other CUDA GPUs: mma.sync with two stages (cp.async: block i + 1 lands
///   under block i's products; the backward reads both of a stage's blocks
///   after they land, which a staggered single stage would not allow), 128
///   rows up to D = 64 and 32 past it, where the dK/dV kernel sits at 255
///   registers and larger blocks spill (64 rows: 3% slower, 15% causal).
/// - Metal: 64-row blocks, one stage in its 32 KB (plain loads).
///
/// The streamed block halves until the stages fit the limit.
constexpr AttnBwdTiles choose_attention_backward_tiles(
    int head_dim,
    DType dtype,
    Backend backend,
    bool wgmma = false) {
  const bool small = attention_padded_head_dim(head_dim, backend) <= 64;
  if (wgmma && backend == Backend::Cuda && dtype != DType::Float32) {
    const int bk = small ? 128 : 64;
    return AttnBwdTiles{
        AttnTiles{64, bk, 4, 2, 1, true, true},
        AttnTiles{64, bk, 4, 2, 1, true, small}};
  }
  const int warps = 4;
  const int rows = warps * fragment_size(backend);
  const int stages = backend == Backend::Metal ? 1 : 2;
  const int limit = backend == Backend::Metal ? kMetalMaxThreadgroupBytes
                                              : cuda_backward_smem_limit(dtype);
  int bk = backend == Backend::Metal ? 64 : (small ? 128 : 32);
  while (bk > 8 &&
         attention_backward_smem_bytes(
             AttnTiles{rows, bk, warps, stages}, head_dim, dtype, backend) >
             limit) {
    bk /= 2;
  }
  const AttnTiles tiles = {rows, bk, warps, stages};
  return AttnBwdTiles{tiles, tiles};
}

} // namespace fa
