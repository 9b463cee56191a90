// What a kernel body runs on when compiled as Metal: simdgroup-matrix
// fragments in every role, the plain-load block loader, padded K/V blocks
// read a fragment at a time (padded_block.h), Q in registers (or, a variant
// to time, in threadgroup memory), and the K/V
// schedule that kv_pipeline.h picks for the stages. A CUDA
// target names its mma.sync fragments per role, its cp.async loader and, on
// Hopper, swizzled blocks for warpgroup products instead (cuda_target.h).
#pragma once

#include "mlx_fused_attn/tile/block_loader.h"
#include "mlx_fused_attn/tile/kv_pipeline.h"
#include "mlx_fused_attn/tile/padded_block.h"
#include "mlx_fused_attn/tile/q_in_padded_shared.h"
#include "mlx_fused_attn/tile/q_in_registers.h"
#include "mlx_fused_attn/tile/simdgroup_frag.h"

namespace fa {

struct MetalTarget {
  template <typename T>
  using FragA = SimdgroupFrag;
  template <typename T>
  using FragB = SimdgroupFrag;
  typedef SimdgroupFrag FragC;
  template <
      typename T,
      int kRows,
      int kCols,
      int kDstLd,
      int kThreads,
      int kSrcCols = kCols>
  using Loader = BlockLoader<T, kRows, kCols, kDstLd, kThreads, kSrcCols>;
  template <typename T, int kRows, int kCols, int kSrcCols, int kThreads>
  using KVBlock =
      PaddedBlock<MetalTarget, T, kRows, kCols, kSrcCols, kThreads>;
  template <
      typename T,
      int kRows,
      int kCols,
      int kSrcCols,
      int kWarpRows,
      int kThreads>
  using QOperand = QInRegisters<SimdgroupFrag, kWarpRows, kCols, kSrcCols>;
  template <typename Block, typename Source, int kStages>
  using KVSchedule = KVPipelineOf<Block, Source, kStages>;
  /// No second key loop for a zero start (attention.h): unmeasured on
  /// Apple GPUs, and the code would double.
  FA_CONST bool kZeroStartLoop = false;
  /// The loader also copies with 32-bit row strides (load_stride32), which
  /// the attention kernel takes where the feature stride32 is on.
  FA_CONST bool kStride32Loads = true;
};

/// The Metal variant with Q in threadgroup memory, read a k step at a time
/// (q_in_padded_shared.h), which frees Q's registers for a load of
/// threadgroup memory each k step (MetalAttnVariant, attention_config.h).
struct MetalQThreadgroupTarget : WithQInPaddedShared<MetalTarget> {};

/// The Metal target keeping Q in threadgroup memory (kQShared) or in
/// registers.
template <bool kQShared>
struct MetalTargetOf {
  typedef MetalTarget type;
};

template <>
struct MetalTargetOf<true> {
  typedef MetalQThreadgroupTarget type;
};

} // namespace fa
