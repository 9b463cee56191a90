// Scalar helpers of the CPU kernels, written so loops over them vectorise:
// dtype conversion and exp2. Included by each kernel_*_impl.h inside the
// instruction-set namespace FA_CPU_ISA (kernel_<isa>.cpp defines it).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "mlx/types/half_types.h"

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

} // namespace mlx_fused_attn::cpu::FA_CPU_ISA
