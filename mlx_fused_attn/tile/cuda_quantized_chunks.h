// CUDA's chunk policies of the quantized block loader
// (quantized_block_loader.h's Chunks), each a choice the decode sweep
// times against QuantizedFloatChunks (benchmarks/cuda_quant_decode_sweep.cu,
// where the register-staged kernel spends more of each block dequantizing
// than reading):
//
//   QuantizedPackedChunks    4-bit codes into half or bfloat16 values two
//                            at a time;
//   QuantizedAlignedWords    a chunk's words in 16-byte loads, where the
//                            caller has seen them so aligned;
//   QuantizedRowsFastest     consecutive threads on consecutive rows, whose
//                            stores into the padded blocks meet in no bank.
//
// QuantizedFloatChunks spends about seven instructions a value (a shift, a
// mask, an or with 2^23, a subtraction, a multiply-add, half a
// conversion), most of them integer ones, which an H100 issues at half the
// fp32 rate. The packed chunks' word of eight codes takes one shift, four
// byte permutes, four masks (each or-ing in the exponent of 2^7 in
// bfloat16, 2^10 in half, whose ulp is 1, so that the pair is 2^e + code
// exactly), four subtractions of 2^e (exact) and four multiply-adds: about
// two instructions a value, half of them integer. Its multiply-add rounds
// scale * code + bias once, in T, where QuantizedFloatChunks rounds it to
// fp32 first, then to T: the two differ where that double rounding does
// (an ulp of T, rarely). Other widths and dtypes (8 bits: 2^7 + 255 is not
// a bfloat16) take QuantizedFloatChunks's arithmetic.
#pragma once

#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/quantized_block_loader.h"

namespace fa {

/// The 16-bit pair type of T and the bits of 2^e + 0 in each half of a
/// word, for T with a packed path.
template <typename T>
struct PackedCodeOf {
  FA_CONST bool kPacked = false;
};
template <>
struct PackedCodeOf<__nv_bfloat16> {
  FA_CONST bool kPacked = true;
  typedef __nv_bfloat162 pair;
  FA_CONST unsigned int kBase = 0x43004300u; ///< 128 (2^7), twice
};
template <>
struct PackedCodeOf<__half> {
  FA_CONST bool kPacked = true;
  typedef __half2 pair;
  FA_CONST unsigned int kBase = 0x64006400u; ///< 1024 (2^10), twice
};

struct QuantizedPackedChunks : QuantizedFloatChunks {
  template <typename T, int kBits, int kValues>
  static __device__ __forceinline__ void
  chunk(T* out, const unsigned int* w, T scale, T bias) {
    if constexpr (kBits == 4 && PackedCodeOf<T>::kPacked) {
      chunk4(out, w, scale, bias);
    } else {
      QuantizedFloatChunks::chunk<T, kBits, kValues>(out, w, scale, bias);
    }
  }

  /// (x & 0x000F000F) | base in one LOP3: written in C, its two constants
  /// make two, since a LOP3 takes one immediate.
  static __device__ __forceinline__ unsigned int mask_or(
      unsigned int x,
      unsigned int base) {
    unsigned int y;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;"
        : "=r"(y)
        : "r"(x), "r"(0x000F000Fu), "r"(base));
    return y;
  }

  /// Word j's codes are values 8j .. 8j + 7 at nibbles 0 .. 7; byte b of
  /// the word holds values 2b (low nibble) and 2b + 1 (high), so byte b of
  /// the word and of the word shifted right by 4 hold them at bits 0..3:
  /// one permute puts the two into the low bytes of a pair's halves.
  template <typename T, int kValues = 32>
  static __device__ __forceinline__ void
  chunk4(T* out, const unsigned int* w, T scale, T bias) {
    typedef PackedCodeOf<T> Code;
    typedef typename Code::pair pair;
    pair scale2, bias2, base;
    scale2.x = scale2.y = scale;
    bias2.x = bias2.y = bias;
    const unsigned int base_bits = Code::kBase;
    memcpy(&base, &base_bits, sizeof(base));
    unsigned int pairs[kValues / 2];
#pragma unroll
    for (int j = 0; j < kValues / 8; ++j) {
      const unsigned int shifted = w[j] >> 4;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        // Bytes b of w[j] and of `shifted` into the halves' low bytes.
        const unsigned int selector = b | (b << 4) | ((4 + b) << 8) |
            ((4 + b) << 12);
        const unsigned int codes =
            mask_or(__byte_perm(w[j], shifted, selector), Code::kBase);
        pair x;
        memcpy(&x, &codes, sizeof(x));
        const pair value = __hfma2(scale2, __hsub2(x, base), bias2);
        memcpy(&pairs[4 * j + b], &value, sizeof(value));
      }
    }
    store_contiguous<unsigned int, kValues / 2>(
        reinterpret_cast<unsigned int*>(out), pairs);
  }
};

/// `Chunks` whose chunks' words come in 16-byte loads (8-byte ones where
/// a chunk is 2 or 6 words; 3 and 5 stay a word a load): a quarter of the
/// load instructions at 4 bits, and of the L1 wavefronts, since a warp's
/// four word loads each touch all of the 512 bytes its chunks span. Only
/// for arrays whose every chunk starts so aligned: the words' pointer and
/// strides whole multiples of the load (the host's to check; mlx-lm's
/// caches, slices of contiguous [B, H, L, D * bits / 32] words, are).
template <typename Chunks>
struct QuantizedAlignedWords : Chunks {
  template <int kWords>
  static __device__ __forceinline__ void
  words(unsigned int* dst, const unsigned int* src) {
    if constexpr (kWords % 4 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        const uint4 u = reinterpret_cast<const uint4*>(src)[i];
        dst[4 * i] = u.x;
        dst[4 * i + 1] = u.y;
        dst[4 * i + 2] = u.z;
        dst[4 * i + 3] = u.w;
      }
    } else if constexpr (kWords % 2 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 2; ++i) {
        const uint2 u = reinterpret_cast<const uint2*>(src)[i];
        dst[2 * i] = u.x;
        dst[2 * i + 1] = u.y;
      }
    } else {
      Chunks::template words<kWords>(dst, src);
    }
  }
};

/// `Chunks` placed with consecutive threads on consecutive rows
/// (QuantizedBlockLoader's kRowsFastest, which says where it applies).
template <typename Chunks>
struct QuantizedRowsFastest : Chunks {
  FA_CONST bool kRowsFastest = true;
};

} // namespace fa
