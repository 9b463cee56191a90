// What a kernel body runs on when compiled as CUDA: mma.sync fragments per
// role (mma_frag.h), the cp.async block loader, and the K/V block type and
// K/V schedule (kv_pipeline.h) of the attention kernel, in these forms:
//
// - CudaTarget (sm_80 on): padded blocks read a fragment at a time by each
//   warp's mma.sync (padded_block.h).
// - CudaWgmmaTarget (sm_90a, FA_HAS_WGMMA): swizzled blocks read by the
//   warpgroup products (swizzled_block.h). Same fragments: a warp's share of
//   a wgmma operand is its mma.sync fragment tile.
// - CudaWgmmaSharedQTarget: as CudaWgmmaTarget, with Q kept in shared
//   memory for the products to read (q_in_shared.h) instead of registers.
// - CudaWgmmaTmaTarget: as CudaWgmmaSharedQTarget, its K and V blocks
//   copied by a producer warpgroup (kv_tma_ring.h); the math's threads only
//   wait for them. CudaWgmmaTmaResumingTarget: its ring runs on across a
//   persistent grid's work tiles.
// - CudaSharedQTarget: as CudaTarget, with Q kept in shared memory and read
//   a k step at a time (q_in_padded_shared.h).
//
// The Metal counterpart is metal_target.h.
#pragma once

#include "mlx_fused_attn/tile/cp_async_loader.h"
#include "mlx_fused_attn/tile/kv_pipeline.h"
#include "mlx_fused_attn/tile/kv_tma_ring.h"
#include "mlx_fused_attn/tile/mma_frag.h"
#include "mlx_fused_attn/tile/padded_block.h"
#include "mlx_fused_attn/tile/q_in_padded_shared.h"
#include "mlx_fused_attn/tile/q_in_registers.h"
#include "mlx_fused_attn/tile/q_in_shared.h"
#include "mlx_fused_attn/tile/smem_layout.h"
#include "mlx_fused_attn/tile/swizzled_block.h"

/// Whether this compilation can issue wgmma: the sm_90a target
/// (-gencode arch=compute_90a,code=sm_90a, or NVRTC's sm_90a).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FA_HAS_WGMMA 1
#else
#define FA_HAS_WGMMA 0
#endif

namespace fa {

struct CudaTarget {
  template <typename T>
  using FragA = MmaFragA<T>;
  template <typename T>
  using FragB = MmaFragB<T>;
  typedef MmaFragC FragC;
  template <
      typename T,
      int kRows,
      int kCols,
      int kDstLd,
      int kThreads,
      int kSrcCols = kCols>
  using Loader = CpAsyncLoader<
      T,
      kRows,
      kCols,
      PaddedRows<T, kDstLd>,
      kThreads,
      kSrcCols>;
  template <typename T, int kRows, int kCols, int kSrcCols, int kThreads>
  using KVBlock = PaddedBlock<CudaTarget, T, kRows, kCols, kSrcCols, kThreads>;
  template <
      typename T,
      int kRows,
      int kCols,
      int kSrcCols,
      int kWarpRows,
      int kThreads>
  using QOperand = QInRegisters<MmaFragA<T>, kWarpRows, kCols, kSrcCols>;
  template <typename Block, typename Source, int kStages>
  using KVSchedule = KVPipelineOf<Block, Source, kStages>;
  /// Whether masked kernels compile a second key loop, for threadgroups
  /// whose S starts at zero (attention.h; WithZeroStartLoop below):
  /// mma.sync's instances spill more with it (H200, sm_80 code: up to 12%
  /// slower).
  FA_CONST bool kZeroStartLoop = false;
  /// No 32-bit-stride copy (the feature stride32 is Metal's).
  FA_CONST bool kStride32Loads = false;
};

struct CudaWgmmaTarget : CudaTarget {
  template <typename T, int kRows, int kCols, int kSrcCols, int kThreads>
  using KVBlock = SwizzledBlock<T, kRows, kCols, kSrcCols, kThreads>;
};

struct CudaWgmmaSharedQTarget : CudaWgmmaTarget {
  template <
      typename T,
      int kRows,
      int kCols,
      int kSrcCols,
      int kWarpRows,
      int kThreads>
  using QOperand = QInShared<T, kRows, kCols, kThreads, kSrcCols>;
};

struct CudaWgmmaTmaTarget : CudaWgmmaSharedQTarget {
  template <typename Block, typename Source, int kStages>
  using KVSchedule = KVTmaRing<Block, Source, kStages>;
  /// Its math threads have 240 registers (attention_kernel.cuh).
  FA_CONST bool kZeroStartLoop = true;
};

/// CudaWgmmaTmaTarget whose ring runs on across a persistent grid's work
/// tiles (kv_tma_ring.h's kResumes); a type of its own, so that the static
/// grid's kernels keep their code.
struct CudaWgmmaTmaResumingTarget : CudaWgmmaTmaTarget {
  template <typename Block, typename Source, int kStages>
  using KVSchedule = KVTmaRing<Block, Source, kStages, true>;
};

/// The producer kernel's target: its ring resumes across tiles or not.
template <bool kResumes>
struct CudaTmaTargetOf {
  typedef CudaWgmmaTmaTarget type;
};
template <>
struct CudaTmaTargetOf<true> {
  typedef CudaWgmmaTmaResumingTarget type;
};

/// `Base` with the second key loop for a zero start where kLoop: the zero
/// start folds into wgmma's first step (masked calls 3-4% faster on the
/// H200), but the loop needs registers (attention_kernel.cuh says where).
template <typename Base, bool kLoop>
struct WithZeroStartLoop : Base {
  FA_CONST bool kZeroStartLoop = kLoop;
};

struct CudaSharedQTarget : WithQInPaddedShared<CudaTarget> {};

/// The target of a kernel instance whose tiles ask for warpgroup products
/// (AttnTiles::wgmma) or not, with Q in shared memory (AttnTiles::q_shared)
/// or registers.
template <bool kWgmma, bool kSharedQ>
struct CudaTargetOf {
  typedef CudaTarget type;
};
template <>
struct CudaTargetOf<false, true> {
  typedef CudaSharedQTarget type;
};
template <>
struct CudaTargetOf<true, false> {
  typedef CudaWgmmaTarget type;
};
template <>
struct CudaTargetOf<true, true> {
  typedef CudaWgmmaSharedQTarget type;
};

} // namespace fa
