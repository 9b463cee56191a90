// Test kernel for the dequantizing block loader
// (mlx_fused_attn/tile/quantized_block_loader.h), run by
// tests/metal_emu/test_quantized_block_loader.py in the Metal emulator and
// compared with a host dequantization of MLX's layout. One threadgroup of
// THREADS threads loads a ROWS x COLS block into threadgroup memory (row
// stride COLS + 8, the padding poisoned by the emulator) and copies it out
// as float32. CHUNKS: the loader's chunk policy, the default or the same
// placed with consecutive threads on consecutive rows (the placement CUDA's
// QuantizedRowsFastest asks for, which is the loader's own code).

#include "mlx_fused_attn/tile/quantized_block_loader.h"

using namespace metal;

struct LoaderDims {
  long word_ld; ///< row strides of the words, scales and biases
  long scale_ld;
  long bias_ld;
  long scale_group_stride; ///< between a row's scales, and its biases
  long bias_group_stride;
  int group_size;
  int rows; ///< rows that exist: the others are zero-filled, not read
};

struct RowsFastestChunks : fa::QuantizedFloatChunks {
  FA_CONST bool kRowsFastest = true;
};

template <
    typename T,
    int BITS,
    int ROWS,
    int COLS,
    int THREADS,
    typename CHUNKS>
[[kernel]] void quantized_block_load(
    const device uint* words [[buffer(0)]],
    const device T* scales [[buffer(1)]],
    const device T* biases [[buffer(2)]],
    device float* dst [[buffer(3)]],
    constant LoaderDims& dims [[buffer(4)]],
    uint tid [[thread_index_in_threadgroup]]) {
  constexpr int kLd = COLS + 8;
  typedef fa::
      QuantizedBlockLoader<T, ROWS, COLS, kLd, THREADS, COLS, BITS, CHUNKS>
          Loader;
  FA_SHARED_ARRAY_DECL T block[ROWS * kLd];
  const fa::QuantizedRows<T> src = {
      words,
      scales,
      biases,
      dims.word_ld,
      dims.scale_ld,
      dims.bias_ld,
      dims.scale_group_stride,
      dims.bias_group_stride,
      dims.group_size};
  if (dims.rows < ROWS) {
    Loader::template load_quantized<true>(block, src, dims.rows, int(tid));
  } else {
    Loader::template load_quantized<false>(block, src, ROWS, int(tid));
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (int i = int(tid); i < ROWS * COLS; i += THREADS) {
    dst[i] = float(block[(i / COLS) * kLd + i % COLS]);
  }
}

#define FA_LOADER_INSTANTIATE_AS(tname, T, BITS, ROWS, COLS, THREADS, CHUNKS, \
                                 suffix)                                      \
  template [[host_name(                                                       \
      "quantized_block_load_" #tname "_b" #BITS "_" #ROWS "x" #COLS          \
      "_t" #THREADS suffix)]] [[kernel]]                                      \
  decltype(quantized_block_load<T, BITS, ROWS, COLS, THREADS, CHUNKS>)        \
      quantized_block_load<T, BITS, ROWS, COLS, THREADS, CHUNKS>;

#define FA_LOADER_INSTANTIATE(tname, T, BITS, ROWS, COLS, THREADS) \
  FA_LOADER_INSTANTIATE_AS(                                        \
      tname, T, BITS, ROWS, COLS, THREADS, fa::QuantizedFloatChunks, "")
#define FA_LOADER_INSTANTIATE_ROWS(tname, T, BITS, ROWS, COLS, THREADS) \
  FA_LOADER_INSTANTIATE_AS(                                             \
      tname, T, BITS, ROWS, COLS, THREADS, RowsFastestChunks, "_rows")

#define FA_LOADER_BITS_AS(INSTANTIATE, tname, T, ROWS, COLS, THREADS) \
  INSTANTIATE(tname, T, 2, ROWS, COLS, THREADS)                      \
  INSTANTIATE(tname, T, 3, ROWS, COLS, THREADS)                      \
  INSTANTIATE(tname, T, 4, ROWS, COLS, THREADS)                      \
  INSTANTIATE(tname, T, 5, ROWS, COLS, THREADS)                      \
  INSTANTIATE(tname, T, 6, ROWS, COLS, THREADS)                      \
  INSTANTIATE(tname, T, 8, ROWS, COLS, THREADS)
#define FA_LOADER_BITS(tname, T, ROWS, COLS, THREADS) \
  FA_LOADER_BITS_AS(FA_LOADER_INSTANTIATE, tname, T, ROWS, COLS, THREADS)
#define FA_LOADER_BITS_ROWS(tname, T, ROWS, COLS, THREADS) \
  FA_LOADER_BITS_AS(FA_LOADER_INSTANTIATE_ROWS, tname, T, ROWS, COLS, THREADS)

// Blocks of more 32-value chunks than threads (64 x 128: two a thread, as
// CUDA's 64-key blocks at D = 128; 64 x 96: the second step ragged) and of
// fewer (threads left idle); rows of whole chunk columns a thread (128 and
// 64 columns: 4 and 2 chunks a row, which divide the threads; 32: one
// chunk a row, as CUDA's 64-key and Metal's 32-key blocks at D = 32), and
// not (96: 3).
FA_LOADER_BITS(float16, half, 64, 128, 128)
FA_LOADER_BITS(float16, half, 64, 32, 128)
FA_LOADER_BITS(bfloat16, bfloat, 32, 32, 128)
FA_LOADER_BITS(bfloat16, bfloat, 64, 96, 128)
FA_LOADER_BITS(float16, half, 16, 128, 128)
FA_LOADER_BITS(float16, half, 8, 64, 128)
FA_LOADER_BITS(float16, half, 16, 96, 128)
FA_LOADER_BITS(bfloat16, bfloat, 16, 128, 128)
FA_LOADER_BITS(float32, float, 16, 128, 128)

// Placed row-major: one warp's 32-key blocks at D = 128 (CUDA's decode
// tiles: four steps of eight rows), four warps' 64-key ones (two steps of
// 32 rows), 64 columns (two chunks a row: groups of 16 threads), and 96
// (three chunks a row, which do not divide 32 threads: the default
// placement).
FA_LOADER_BITS_ROWS(float16, half, 32, 128, 32)
FA_LOADER_BITS_ROWS(bfloat16, bfloat, 64, 128, 128)
FA_LOADER_BITS_ROWS(float16, half, 32, 64, 32)
FA_LOADER_BITS_ROWS(float16, half, 16, 96, 32)
