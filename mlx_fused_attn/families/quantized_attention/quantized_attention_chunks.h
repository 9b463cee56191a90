// The CUDA quantized kernels' chunk policies as the host names them: which
// of the loader's policies (quantized_block_loader.h's QuantizedFloatChunks,
// tile/cuda_quantized_chunks.h's) an instance runs, where each applies, and
// the host's check of the alignment the 16-byte word loads need. Host C++,
// free of CUDA and MLX, read by the planner, the kernel records and the
// instance list; Metal runs QuantizedFloatChunks alone.
#pragma once

#include <cstdint>

#include "mlx_fused_attn/families/quantized_attention/quantized_attention_config.h"
#include "mlx_fused_attn/kernels/attention_config.h"

namespace fa {

enum class QuantizedChunks {
  /// QuantizedFloatChunks: every bit width and dtype.
  Float,
  /// QuantizedAlignedWords<QuantizedPackedChunks>: 4-bit codes into 16-bit
  /// pairs, a chunk's words in 16-byte loads.
  PackedWide,
  /// QuantizedRowsFastest<QuantizedAlignedWords<QuantizedPackedChunks>>:
  /// PackedWide with consecutive threads on consecutive rows.
  PackedWideRows,
};

/// The policy's C++ type, as kernel expressions spell it.
inline const char* quantized_chunks_type(QuantizedChunks c) {
  switch (c) {
    case QuantizedChunks::Float:
      return "fa::QuantizedFloatChunks";
    case QuantizedChunks::PackedWide:
      return "fa::QuantizedAlignedWords<fa::QuantizedPackedChunks>";
    case QuantizedChunks::PackedWideRows:
      return "fa::QuantizedRowsFastest<fa::QuantizedAlignedWords<"
             "fa::QuantizedPackedChunks>>";
  }
  return "";
}

/// The policy's name for people ("float", "packed_16b", "packed_16b_rows").
inline const char* quantized_chunks_name(QuantizedChunks c) {
  switch (c) {
    case QuantizedChunks::Float:
      return "float";
    case QuantizedChunks::PackedWide:
      return "packed_16b";
    case QuantizedChunks::PackedWideRows:
      return "packed_16b_rows";
  }
  return "";
}

/// Whether the packed policies read 16-byte aligned words.
constexpr bool quantized_chunks_need_aligned_words(QuantizedChunks c) {
  return c != QuantizedChunks::Float;
}

/// The chunk policy of the quantized kernels of `tiles` at (head_dim, bits,
/// dtype) on CUDA, each the fastest of the H100 decode sweep
/// (benchmarks/cuda_quant_decode_sweep.cu, docs/gpu_kernels.md) where it
/// applies; `float_forced`: QuantizedFloatChunks everywhere (the switch
/// that compares them, kernel_switches.h).
/// - 4 bits in half or bfloat16: the packed pairs (two codes a 16-bit
///   pair; 8 bits do not fit the pair's mantissa trick, fp32 has no pair).
/// - The decode tiles (one warp): PackedWide; their rows-fastest form was
///   no faster (B=8: 151.8 against 149.5 us).
/// - The default tiles: PackedWideRows where the loader can place rows
///   fastest (B=1, 32K keys: 46.7 us float, 37.1 wide, 36.6 rows),
///   PackedWide where it cannot (D = 96 and 192 with 128 threads).
constexpr QuantizedChunks choose_quantized_chunks(
    AttnTiles tiles,
    int head_dim,
    int bits,
    DType dtype,
    bool float_forced) {
  if (float_forced || bits != 4 || dtype == DType::Float32) {
    return QuantizedChunks::Float;
  }
  if (tiles == choose_quantized_decode_tiles()) {
    return QuantizedChunks::PackedWide;
  }
  if (quantized_rows_fastest_applies(head_dim, tiles.warps * kSimdWidth)) {
    return QuantizedChunks::PackedWideRows;
  }
  return QuantizedChunks::PackedWide;
}

/// Whether a quantized operand's words can be read 16 bytes at a time:
/// its first word (`address`, bytes) and each step between rows, heads
/// and batches (`strides`, words, of the axes of `shape` longer than one)
/// on 16-byte boundaries. A row's words are contiguous (the backend copies
/// them so where they are not).
inline bool quantized_words_aligned(
    std::uintptr_t address,
    const int64_t* strides,
    const int* shape) {
  if (address % 16 != 0) {
    return false;
  }
  for (int i = 0; i < 3; ++i) {
    if (shape[i] > 1 && strides[i] % 4 != 0) {
      return false;
    }
  }
  return true;
}

} // namespace fa
