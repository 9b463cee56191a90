// Scalar helpers of the CPU kernels, written so loops over them vectorise:
// dtype conversion (of a row, and of strided rows into fp32) and exp2. Included by each kernel_*_impl.h inside the
// instruction-set namespace FA_CPU_ISA (kernel_<isa>.cpp defines it).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__F16C__) || defined(__AVX__)
#include <immintrin.h>
#endif

#include "mlx/types/half_types.h"
#include "mlx_fused_attn/params.h"

namespace mlx_fused_attn::cpu::FA_CPU_ISA {

constexpr float LOG2E = 1.4426950408889634f;

inline float to_float(float x) {
  return x;
}
inline float to_float(mlx::core::float16_t x) {
#if defined(__F16C__)
  uint16_t bits;
  std::memcpy(&bits, &x, 2);
  return _cvtsh_ss(bits);
#else
  return static_cast<float>(x);
#endif
}
inline float to_float(mlx::core::bfloat16_t x) {
  uint32_t bits = static_cast<uint32_t>(x.bits_) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
template <typename T>
inline T from_float(float x) {
  return static_cast<T>(x);
}

// 2^x, branch-free so loops over it vectorise: 2^floor(x) from the exponent
// bits times a degree-5 fit of 2^f on [0, 1) (relative error 1.5e-7).
// Underflow gives exactly 0 (masked keys must contribute nothing) and NaN
// stays NaN.
inline float exp2_fast(float x) {
  float xc = x < -126.0f ? -126.0f : x;
  xc = xc > 127.0f ? 127.0f : xc;
  float fl = std::floor(xc);
  float f = xc - fl;
  float p = 0.00187623f;
  p = p * f + 0.00899258f;
  p = p * f + 0.05582361f;
  p = p * f + 0.24015453f;
  p = p * f + 0.69315296f;
  p = p * f + 1.0f;
  int32_t bits = (static_cast<int32_t>(fl) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return x < -126.0f ? 0.0f : p * scale;
}

// Converts n contiguous elements to fp32 times `mul`.
template <typename T>
inline void convert_row(const T* src, int n, float mul, float* dst) {
  int c = 0;
#if defined(__F16C__)
  // GCC does not vectorise the scalar half conversion; F16C does 8 at once.
  if (std::is_same<T, mlx::core::float16_t>::value) {
    const __m256 m = _mm256_set1_ps(mul);
    for (; c + 8 <= n; c += 8) {
      __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c));
      _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_cvtph_ps(h), m));
    }
  }
#endif
  for (; c < n; ++c) {
    dst[c] = to_float(src[c]) * mul;
  }
}

// dst[c] = src[c] * mul converted to T, for n contiguous elements.
template <typename T>
inline void store_row(const float* src, int n, float mul, T* dst) {
  int c = 0;
#if defined(__F16C__)
  // As in convert_row: F16C rounds 8 at once (to nearest even, as the scalar
  // conversion does).
  if (std::is_same<T, mlx::core::float16_t>::value) {
    const __m256 m = _mm256_set1_ps(mul);
    for (; c + 8 <= n; c += 8) {
      const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(src + c), m);
      _mm_storeu_si128(
          reinterpret_cast<__m128i*>(dst + c),
          _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
  }
#endif
  for (; c < n; ++c) {
    dst[c] = from_float<T>(src[c] * mul);
  }
}

// dst[r * cols + c] = src[r * row_stride + c * col_stride] * mul: `rows`
// strided rows converted to a dense fp32 block, the unit-stride ones a row
// at a time through convert_row.
template <typename T>
void load_rows(
    const T* src,
    fa::stride_t row_stride,
    fa::stride_t col_stride,
    int rows,
    int cols,
    float mul,
    float* dst) {
  for (int r = 0; r < rows; ++r) {
    const T* s = src + r * row_stride;
    float* d = dst + r * cols;
    if (col_stride == 1) {
      convert_row(s, cols, mul, d);
    } else {
      for (int c = 0; c < cols; ++c) {
        d[c] = to_float(s[c * col_stride]) * mul;
      }
    }
  }
}

// dst[c * dst_stride + r] = src[r * cols + c]: a row-major rows x cols block
// transposed. With AVX, 8 x 8 blocks go through registers (scalar, it is a
// load and a store per element, and the neighborhood kernel transposes every
// key it converts).
inline void transpose(
    const float* src,
    int rows,
    int cols,
    float* dst,
    int dst_stride) {
  int r0 = 0;
#if defined(__AVX__)
  for (; r0 + 8 <= rows; r0 += 8) {
    int c0 = 0;
    for (; c0 + 8 <= cols; c0 += 8) {
      __m256 x[8], y[8];
      for (int i = 0; i < 8; ++i) {
        x[i] = _mm256_loadu_ps(src + (r0 + i) * cols + c0);
      }
      for (int i = 0; i < 8; i += 2) {
        y[i] = _mm256_unpacklo_ps(x[i], x[i + 1]);
        y[i + 1] = _mm256_unpackhi_ps(x[i], x[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        x[i] = _mm256_shuffle_ps(y[i], y[i + 2], 0x44);
        x[i + 1] = _mm256_shuffle_ps(y[i], y[i + 2], 0xee);
        x[i + 2] = _mm256_shuffle_ps(y[i + 1], y[i + 3], 0x44);
        x[i + 3] = _mm256_shuffle_ps(y[i + 1], y[i + 3], 0xee);
      }
      // x[0..3] hold columns 0, 1, 2, 3 of rows 0-3 (low lane) and 4-7 of
      // the same rows (high lane); x[4..7] likewise for rows 4-7.
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(
            dst + (c0 + i) * dst_stride + r0,
            _mm256_permute2f128_ps(x[i], x[i + 4], 0x20));
        _mm256_storeu_ps(
            dst + (c0 + i + 4) * dst_stride + r0,
            _mm256_permute2f128_ps(x[i], x[i + 4], 0x31));
      }
    }
    for (; c0 < cols; ++c0) {
      for (int i = 0; i < 8; ++i) {
        dst[c0 * dst_stride + r0 + i] = src[(r0 + i) * cols + c0];
      }
    }
  }
#endif
  for (; r0 < rows; ++r0) {
    for (int c = 0; c < cols; ++c) {
      dst[c * dst_stride + r0] = src[r0 * cols + c];
    }
  }
}

} // namespace mlx_fused_attn::cpu::FA_CPU_ISA
