// Device-to-threadgroup block copy that dequantizes: the loader of K and V
// blocks kept as MLX's affine quantization stores them (mx.quantize, mode
// "affine"), written into threadgroup memory in the element type, in the
// layout the float loaders write (a padded row a key), so that the
// products read the block as they read a float one.
//
// MLX's layout, for a row of kCols values quantized to kBits bits in groups
// of group_size values (checked against mx.dequantize with MLX 0.32.4, for
// 2, 3, 4, 5, 6 and 8 bits and groups of 32, 64 and 128):
//
//   words   uint32 [kCols * kBits / 32]: the row's values as one
//           little-endian bit stream, value i at bits i * kBits ..
//           i * kBits + kBits - 1 (of 3, 5 and 6 bits some straddle two
//           words)
//   scales  T [kCols / group_size]
//   biases  T [kCols / group_size]
//   value i = scales[i / group_size] * q_i + biases[i / group_size]
//
// Each thread takes chunks of 32 values of one row: kBits whole words (so
// that every shift is a constant once unrolled), lying in one group
// (groups are whole multiples of 32 values), so one scale and one bias.
// How a thread's chunks are placed, loaded and dequantized is the loader's
// `Chunks` policy: by default QuantizedFloatChunks's (consecutive threads
// on a row's consecutive chunks, a word a load, fp32 rounded once to T);
// CUDA may take the 16-bit pairs, 16-byte loads and row-major placement of
// tile/cuda_quantized_chunks.h.
//
// A block moves in two halves: fetch reads a thread's chunks into
// registers (plain loads, which do not block the thread until their values
// are used), dequantize writes them into threadgroup memory. Between the
// two a thread can run the products of another block, so that the loads
// are in flight under them (kv_pipeline.h's KVRegisterStaged);
// load_quantized does both at once.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// One (batch, head)'s rows of a quantized array, from the row a block
/// starts at: its words, scales and biases, each with its own row stride
/// (in elements: words, or T); a row's words are contiguous, its scales
/// and biases step by their group strides.
template <typename T>
struct QuantizedRows {
  const FA_DEVICE unsigned int* words;
  const FA_DEVICE T* scales;
  const FA_DEVICE T* biases;
  stride_t word_ld;
  stride_t scale_ld;
  stride_t bias_ld;
  stride_t scale_group_stride; ///< between a row's consecutive scales
  stride_t bias_group_stride; ///< between a row's consecutive biases
  int group_size; ///< values a scale and a bias cover: 32, 64 or 128
};

/// `rows` from its row `row` on.
template <typename T>
FA_FUNC QuantizedRows<T> quantized_rows_from(QuantizedRows<T> rows, int row) {
  rows.words += row * rows.word_ld;
  rows.scales += row * rows.scale_ld;
  rows.biases += row * rows.bias_ld;
  return rows;
}

/// The loader's chunks, everywhere: consecutive threads on a row's
/// consecutive chunks, their words a load each (a row's words are only
/// 4-byte aligned in general), each value shifted out of its word (two
/// words where it straddles), scaled and biased in fp32 and rounded once
/// to T.
struct QuantizedFloatChunks {
  /// Whether eight consecutive threads take one chunk of eight consecutive
  /// rows, in place of consecutive chunks of a row (QuantizedBlockLoader's
  /// step_row).
  FA_CONST bool kRowsFastest = false;

  /// A chunk's kWords words from `src` into `dst`.
  template <int kWords>
  static FA_FUNC void words(
      FA_THREAD unsigned int* dst,
      const FA_DEVICE unsigned int* src) {
    FA_UNROLL
    for (int i = 0; i < kWords; ++i) {
      dst[i] = src[i];
    }
  }

  /// 2^23 as a float's bits: or-ed with a code below 2^23 it is the float
  /// 2^23 + code, exactly, which one subtraction makes the code's value
  /// (two full-rate instructions in place of an integer conversion, which
  /// runs at a fraction of the fp32 rate on NVIDIA GPUs).
  FA_CONST unsigned int kFloatCodeBits = 0x4B000000u;

  /// kValues kBits-bit values from `w` into `out` (16-byte aligned).
  template <typename T, int kBits, int kValues>
  static FA_FUNC void chunk(
      FA_THREADGROUP T* out,
      const FA_THREAD unsigned int* w,
      T scale_t,
      T bias_t) {
    const unsigned int mask = (1u << kBits) - 1u;
    const float scale = static_cast<float>(scale_t);
    const float bias = static_cast<float>(bias_t);
    T values[kValues];
    FA_UNROLL
    for (int x = 0; x < kValues; ++x) {
      const int bit = x * kBits;
      const int word = bit / 32;
      const int shift = bit % 32;
      unsigned int q = w[word] >> shift;
      if (shift + kBits > 32) {
        q |= w[word + 1] << (32 - shift);
      }
      const float code = FA_AS_FLOAT(kFloatCodeBits | (q & mask)) - 8388608.0f;
      values[x] = static_cast<T>(scale * code + bias);
    }
    store_contiguous<T, kValues>(out, values);
  }
};

/// Dequantizes a kRows x kCols block of kBits-bit rows into threadgroup
/// memory of row stride kDstLd, its chunks placed, loaded and dequantized
/// as `Chunks` says (QuantizedFloatChunks's interface). The template
/// parameters before kBits are those of every target's Loader
/// (block_loader.h), so that a target can name this one its loader
/// (quantized_kv_target.h); every column must exist (kSrcCols == kCols:
/// head dims that are whole groups).
template <
    typename T,
    int kRows,
    int kCols,
    int kDstLd,
    int kThreads,
    int kSrcCols,
    int kBits,
    typename Chunks = QuantizedFloatChunks>
struct QuantizedBlockLoader {
  static_assert(
      kBits == 2 || kBits == 3 || kBits == 4 || kBits == 5 || kBits == 6 ||
          kBits == 8,
      "MLX's affine quantization has 2, 3, 4, 5, 6 or 8 bits");
  static_assert(
      kSrcCols == kCols && kCols % 32 == 0,
      "quantized rows are whole groups: no padded columns");
  static_assert(
      kDstLd * sizeof(T) % 16 == 0,
      "a chunk's values are stored 16 bytes at a time (store_contiguous)");
  FA_CONST int kChunkValues = 32;
  FA_CONST int kChunkWords = kChunkValues * kBits / 32;
  FA_CONST int kChunksPerRow = kCols / kChunkValues;
  FA_CONST int kChunks = kRows * kChunksPerRow;
  FA_CONST int kSteps = (kChunks + kThreads - 1) / kThreads;
  /// Rows between a thread's chunks at consecutive steps where the threads
  /// are whole rows of chunks (then each reads one column of chunks); 0
  /// where they are not (D = 96 and 192 with 128 threads).
  FA_CONST int kRowStep =
      kThreads % kChunksPerRow == 0 ? kThreads / kChunksPerRow : 0;
  /// Threads that take eight rows' chunks, where Chunks::kRowsFastest.
  FA_CONST int kGroupThreads = 8 * kChunksPerRow;
  /// Whether consecutive threads take consecutive rows (Chunks asks it and
  /// the threads are whole groups of eight rows): then the eight threads
  /// of a quarter warp, whose 16-byte stores shared memory serves at once,
  /// write eight rows one padded row apart, each in its own four banks,
  /// where four chunks of two rows (64 bytes apart) would meet two by two
  /// in the same banks. Their loads from device memory span the same 512
  /// bytes a warp either way.
  FA_CONST bool kRowsFastest = Chunks::kRowsFastest && kRowStep > 0 &&
      kThreads % kGroupThreads == 0;
  /// A thread's loads return before it goes on (to load_quantized's
  /// callers: its fetch alone does not wait).
  FA_CONST bool kAsync = false;

  /// A thread's chunks of one block as read from device memory, in
  /// registers until dequantize: the scales and biases stay in T, since
  /// converting them would wait for their loads.
  struct Fetched {
    unsigned int words[kSteps][kChunkWords];
    T scale[kSteps];
    T bias[kSteps];
  };

  /// Thread tid's chunks of the block's rows from `src` (its first row)
  /// into `f`; with kSafe, rows at and past `rows` are not read but given
  /// zero codes, scale and bias, so that they dequantize to zeros and
  /// products with them stay finite.
  template <bool kSafe>
  static FA_FUNC void fetch(
      FA_THREAD Fetched& f,
      QuantizedRows<T> src,
      int rows,
      int tid) {
    if constexpr (kRowStep > 0) {
      fetch_column<kSafe>(f, src, rows, tid);
    } else {
      FA_UNROLL
      for (int step = 0; step < kSteps; ++step) {
        const int idx = step * kThreads + tid;
        if (kChunks % kThreads == 0 || idx < kChunks) {
          const int r = idx / kChunksPerRow;
          const int chunk = idx % kChunksPerRow;
          if (kSafe && r >= rows) {
            fetch_zeros(f, step);
          } else {
            const int group = (chunk * kChunkValues) >> group_shift(src);
            fetch_at(
                f, step, src.words + r * src.word_ld + chunk * kChunkWords,
                src.scales + r * src.scale_ld +
                    group * src.scale_group_stride,
                src.biases + r * src.bias_ld + group * src.bias_group_stride);
          }
        }
      }
    }
  }

  /// Where the threads are whole rows of chunks (kRowStep > 0): thread
  /// tid's row among a step's kRowStep rows, and its chunk of each.
  static FA_FUNC int step_row(int tid) {
    return kRowsFastest ? tid / kGroupThreads * 8 + tid % 8
                        : tid / kChunksPerRow;
  }
  static FA_FUNC int step_chunk(int tid) {
    return kRowsFastest ? tid % kGroupThreads / 8 : tid % kChunksPerRow;
  }

  /// fetch where the threads are whole rows of chunks (kRowStep > 0):
  /// thread tid reads chunk step_chunk(tid) of rows kRowStep apart, so its
  /// pointers are made once and stepped by a constant number of rows.
  template <bool kSafe>
  static FA_FUNC void fetch_column(
      FA_THREAD Fetched& f,
      QuantizedRows<T> src,
      int rows,
      int tid) {
    const int chunk = step_chunk(tid);
    const int group = (chunk * kChunkValues) >> group_shift(src);
    int r = step_row(tid);
    QuantizedRows<T> at = quantized_rows_from(src, r);
    at.words += chunk * kChunkWords;
    at.scales += group * src.scale_group_stride;
    at.biases += group * src.bias_group_stride;
    FA_UNROLL
    for (int step = 0; step < kSteps; ++step) {
      if (kChunks % kThreads == 0 || r < kRows) {
        if (kSafe && r >= rows) {
          fetch_zeros(f, step);
        } else {
          fetch_at(f, step, at.words, at.scales, at.biases);
        }
      }
      r += kRowStep;
      at = quantized_rows_from(at, kRowStep);
    }
  }

  /// log2 of `src`'s group size: groups are 32, 64 or 128 values, so a
  /// value's group is a shift, not a division.
  static FA_FUNC int group_shift(QuantizedRows<T> src) {
    return src.group_size == 32 ? 5 : src.group_size == 64 ? 6 : 7;
  }

  /// A chunk's words from `words`, its scale and bias from `scale` and
  /// `bias`, into step `step` of `f`.
  static FA_FUNC void fetch_at(
      FA_THREAD Fetched& f,
      int step,
      const FA_DEVICE unsigned int* words,
      const FA_DEVICE T* scale,
      const FA_DEVICE T* bias) {
    Chunks::template words<kChunkWords>(f.words[step], words);
    f.scale[step] = *scale;
    f.bias[step] = *bias;
  }

  /// Zero codes, scale and bias into step `step` of `f`: zeros once
  /// dequantized.
  static FA_FUNC void fetch_zeros(FA_THREAD Fetched& f, int step) {
    FA_UNROLL
    for (int i = 0; i < kChunkWords; ++i) {
      f.words[step][i] = 0u;
    }
    f.scale[step] = T(0);
    f.bias[step] = T(0);
  }

  /// Thread tid's chunks, fetched into `f`, dequantized into the block at
  /// `dst`.
  static FA_FUNC void dequantize(
      FA_THREADGROUP T* dst,
      const FA_THREAD Fetched& f,
      int tid) {
    FA_UNROLL
    for (int step = 0; step < kSteps; ++step) {
      // Where fetch read the chunk: chunk step * kThreads + tid in row
      // order (fetch_column's too, unless kRowsFastest).
      int r;
      int chunk;
      if constexpr (kRowsFastest) {
        r = step * kRowStep + step_row(tid);
        chunk = step_chunk(tid);
      } else {
        const int idx = step * kThreads + tid;
        r = idx / kChunksPerRow;
        chunk = idx % kChunksPerRow;
      }
      if (kChunks % kThreads == 0 || r < kRows) {
        Chunks::template chunk<T, kBits, kChunkValues>(
            dst + r * kDstLd + chunk * kChunkValues, f.words[step],
            f.scale[step], f.bias[step]);
      }
    }
  }

  /// The block's rows from `src` into `dst` at once: fetch, then
  /// dequantize.
  template <bool kSafe>
  static FA_FUNC void load_quantized(
      FA_THREADGROUP T* dst,
      QuantizedRows<T> src,
      int rows,
      int tid) {
    Fetched f;
    fetch<kSafe>(f, src, rows, tid);
    dequantize(dst, f, tid);
  }

  /// Its own loads are plain (their values are waited for where used), so
  /// commit has nothing to close; wait waits for the asynchronous copies
  /// of another loader that joined a block's group: Q's in shared memory on
  /// CUDA (q_in_padded_shared.h, attention.h's load_q), all of them.
  static FA_FUNC void commit() {}
  template <int kPending = 0>
  static FA_FUNC void wait() {
    async_copies_wait_all();
  }
};

} // namespace fa
