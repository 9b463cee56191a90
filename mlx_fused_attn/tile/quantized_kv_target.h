// A target whose K/V blocks are read from MLX's quantized layout: `Base`'s
// fragments, Q operand and products on padded blocks (padded_block.h),
// with the dequantizing loader (quantized_block_loader.h) in place of the
// base's copy. Its loads are plain, so the K/V schedule is the plain one
// (kv_pipeline.h's KVPlain) on Metal and CUDA alike. The one place the
// quantized family differs from the float kernels' targets.
#pragma once

#include "mlx_fused_attn/tile/padded_block.h"
#include "mlx_fused_attn/tile/quantized_block_loader.h"

namespace fa {

template <typename Base, int kBits>
struct QuantizedKVTarget : Base {
  template <
      typename T,
      int kRows,
      int kCols,
      int kDstLd,
      int kThreads,
      int kSrcCols = kCols>
  using Loader = QuantizedBlockLoader<
      T,
      kRows,
      kCols,
      kDstLd,
      kThreads,
      kSrcCols,
      kBits>;
  template <typename T, int kRows, int kCols, int kSrcCols, int kThreads>
  using KVBlock =
      PaddedBlock<QuantizedKVTarget, T, kRows, kCols, kSrcCols, kThreads>;
  /// The dequantizing loader has no 32-bit-stride copy.
  FA_CONST bool kStride32Loads = false;
};

} // namespace fa
