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
// Each thread decodes runs of kRunValues values, the fewest that fill
// whole words (so that every shift is a constant once unrolled), and a run
// lies in one group (groups are whole multiples of 32 values), so it reads
// one scale and one bias. The arithmetic is fp32, rounded once to T.
// Loads are plain and synchronous, as block_loader.h's: the K/V schedule
// (kv_pipeline.h) takes its plain form for them on every target.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// Values of `bits` bits that fill whole 32-bit words: 32 / gcd(bits, 32).
constexpr int quantized_run_values(int bits) {
  return bits == 8 ? 4 : bits == 4 ? 8 : bits % 2 == 0 ? 16 : 32;
}

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

/// Dequantizes a kRows x kCols block of kBits-bit rows into threadgroup
/// memory of row stride kDstLd. The template parameters before kBits are
/// those of every target's Loader (block_loader.h), so that a target can
/// name this one its loader (quantized_kv_target.h); every column must
/// exist (kSrcCols == kCols: head dims that are whole groups).
template <
    typename T,
    int kRows,
    int kCols,
    int kDstLd,
    int kThreads,
    int kSrcCols,
    int kBits>
struct QuantizedBlockLoader {
  static_assert(
      kBits == 2 || kBits == 3 || kBits == 4 || kBits == 5 || kBits == 6 ||
          kBits == 8,
      "MLX's affine quantization has 2, 3, 4, 5, 6 or 8 bits");
  static_assert(
      kSrcCols == kCols && kCols % 32 == 0,
      "quantized rows are whole groups: no padded columns");
  FA_CONST int kRunValues = quantized_run_values(kBits);
  FA_CONST int kRunWords = kRunValues * kBits / 32;
  FA_CONST int kRunsPerRow = kCols / kRunValues;
  FA_CONST int kRuns = kRows * kRunsPerRow;
  FA_CONST int kSteps = (kRuns + kThreads - 1) / kThreads;
  FA_CONST unsigned int kValueMask = (1u << kBits) - 1u;
  /// A thread's loads return before it goes on.
  FA_CONST bool kAsync = false;

  /// The block's rows from `src` (its first row); with kSafe, rows at and
  /// past `rows` are zero-filled, not read, so that products with them
  /// stay finite.
  template <bool kSafe>
  static FA_FUNC void load_quantized(
      FA_THREADGROUP T* dst,
      QuantizedRows<T> src,
      int rows,
      int tid) {
    FA_UNROLL
    for (int step = 0; step < kSteps; ++step) {
      const int idx = step * kThreads + tid;
      if (kRuns % kThreads == 0 || idx < kRuns) {
        const int r = idx / kRunsPerRow;
        const int run = idx % kRunsPerRow;
        FA_THREADGROUP T* out = dst + r * kDstLd + run * kRunValues;
        if (kSafe && r >= rows) {
          FA_UNROLL
          for (int x = 0; x < kRunValues; ++x) {
            out[x] = T(0);
          }
        } else {
          decode_run(out, src, r, run);
        }
      }
    }
  }

  /// Run `run` of row r into `out`: its words, then each value shifted out
  /// of them (two words where it straddles), scaled and biased.
  static FA_FUNC void decode_run(
      FA_THREADGROUP T* out,
      QuantizedRows<T> src,
      int r,
      int run) {
    const FA_DEVICE unsigned int* words =
        src.words + r * src.word_ld + run * kRunWords;
    unsigned int w[kRunWords];
    FA_UNROLL
    for (int i = 0; i < kRunWords; ++i) {
      w[i] = words[i];
    }
    const int group = run * kRunValues / src.group_size;
    const float scale = static_cast<float>(
        src.scales[r * src.scale_ld + group * src.scale_group_stride]);
    const float bias = static_cast<float>(
        src.biases[r * src.bias_ld + group * src.bias_group_stride]);
    FA_UNROLL
    for (int x = 0; x < kRunValues; ++x) {
      const int bit = x * kBits;
      const int word = bit / 32;
      const int shift = bit % 32;
      unsigned int q = w[word] >> shift;
      if (shift + kBits > 32) {
        q |= w[word + 1] << (32 - shift);
      }
      out[x] =
          static_cast<T>(scale * static_cast<float>(q & kValueMask) + bias);
    }
  }

  /// Plain loads have landed when load returns (block_loader.h).
  static FA_FUNC void commit() {}
  template <int kPending = 0>
  static FA_FUNC void wait() {}
};

} // namespace fa
