// A target whose K/V blocks are read from MLX's quantized layout: `Base`'s
// fragments, Q operand and products on padded blocks (padded_block.h),
// with the dequantizing loader (quantized_block_loader.h) in place of the
// base's copy. The one place the quantized family differs from the float
// kernels' targets.
//
// Its K/V schedule (kv_pipeline.h), on Metal and CUDA alike: by default the
// register stage (KVRegisterStaged), the next block's words, scales and
// biases in flight in each thread's registers under this block's products
// (one block ahead is 9 KB a threadgroup at 4 bits, D = 128: two a
// multiprocessor hold the ~18 KB in flight that an H100's memory needs,
// 3.35 TB/s x ~700 ns / 132 SMs, for a block's share of registers, where a
// shared-memory ring would cost a stage of threadgroup memory a block);
// with kRegisterStaged off, the plain one (KVPlain: a block's loads waited
// for with the threadgroup idle), which the decode sweep times against it
// (benchmarks/cuda_quant_decode_sweep.cu).
//
// `Chunks`: how the loader places, loads and dequantizes a thread's chunks
// (quantized_block_loader.h's QuantizedFloatChunks, or CUDA's,
// cuda_quantized_chunks.h).
#pragma once

#include "mlx_fused_attn/tile/kv_pipeline.h"
#include "mlx_fused_attn/tile/padded_block.h"
#include "mlx_fused_attn/tile/quantized_block_loader.h"

namespace fa {

template <typename Block, typename Source, bool kRegisterStaged>
struct QuantizedKVScheduleOf {
  typedef KVRegisterStaged<Block, Source> type;
};
template <typename Block, typename Source>
struct QuantizedKVScheduleOf<Block, Source, false> {
  typedef KVPlain<Block, Source> type;
};

template <
    typename Base,
    int kBits,
    bool kRegisterStaged = true,
    typename Chunks = QuantizedFloatChunks>
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
      kBits,
      Chunks>;
  template <typename T, int kRows, int kCols, int kSrcCols, int kThreads>
  using KVBlock =
      PaddedBlock<QuantizedKVTarget, T, kRows, kCols, kSrcCols, kThreads>;
  /// One stage: the register stage holds the next block, not a ring.
  template <typename Block, typename Source, int kStages>
  using KVSchedule =
      typename QuantizedKVScheduleOf<Block, Source, kRegisterStaged>::type;
  /// The dequantizing loader has no 32-bit-stride copy.
  FA_CONST bool kStride32Loads = false;
};

} // namespace fa
