// Apple's compiler builtins (`__metal_*`) that the bodies of Metal's
// standard headers call, and the macros those headers define around them.
// MLX's bf16_math.h calls them directly to give bfloat its math and simd
// overloads (in float, or on the bits as ushort), so they are defined here
// over the shim's own functions: the math with the emulator's one
// precision (`fast` is accepted and changes nothing, as for metal::fast::),
// the simdgroup functions as the same rendezvous as metal::simd_*.
#pragma once

#include "math.h"
#include "runtime_api.h"
#include "scalars.h"
#include "simd.h"
#include "simd_fill.h"

#define __METAL_FAST_MATH__ true
#define __METAL_PRECISE_MATH__ false
#define __METAL_MAYBE_FAST_MATH__ __METAL_FAST_MATH__

#define FA_EMU_BUILTIN_UNARY(name, expr) \
  template <class T>                     \
  T __metal_##name(T x, bool) {          \
    return expr;                         \
  }
#define FA_EMU_BUILTIN_BINARY(name, expr) \
  template <class T>                      \
  T __metal_##name(T x, T y, bool) {      \
    return expr;                          \
  }

FA_EMU_BUILTIN_UNARY(acos, metal::acos(x))
FA_EMU_BUILTIN_UNARY(acosh, T(__builtin_acoshf(float(x))))
FA_EMU_BUILTIN_UNARY(asin, metal::asin(x))
FA_EMU_BUILTIN_UNARY(asinh, T(__builtin_asinhf(float(x))))
FA_EMU_BUILTIN_UNARY(atan, metal::atan(x))
FA_EMU_BUILTIN_UNARY(atanh, T(__builtin_atanhf(float(x))))
FA_EMU_BUILTIN_UNARY(ceil, metal::ceil(x))
FA_EMU_BUILTIN_UNARY(cos, metal::cos(x))
FA_EMU_BUILTIN_UNARY(cosh, metal::cosh(x))
FA_EMU_BUILTIN_UNARY(cospi, T(__builtin_cosf(M_PI_F * float(x))))
FA_EMU_BUILTIN_UNARY(exp, metal::exp(x))
FA_EMU_BUILTIN_UNARY(exp10, metal::exp10(x))
FA_EMU_BUILTIN_UNARY(exp2, metal::exp2(x))
FA_EMU_BUILTIN_UNARY(fabs, metal::fabs(x))
FA_EMU_BUILTIN_UNARY(floor, metal::floor(x))
FA_EMU_BUILTIN_UNARY(fract, metal::fract(x))
FA_EMU_BUILTIN_UNARY(log, metal::log(x))
FA_EMU_BUILTIN_UNARY(log10, metal::log10(x))
FA_EMU_BUILTIN_UNARY(log2, metal::log2(x))
FA_EMU_BUILTIN_UNARY(rint, metal::rint(x))
FA_EMU_BUILTIN_UNARY(round, metal::round(x))
FA_EMU_BUILTIN_UNARY(rsqrt, metal::rsqrt(x))
FA_EMU_BUILTIN_UNARY(sin, metal::sin(x))
FA_EMU_BUILTIN_UNARY(sinh, metal::sinh(x))
FA_EMU_BUILTIN_UNARY(sinpi, T(__builtin_sinf(M_PI_F * float(x))))
FA_EMU_BUILTIN_UNARY(sqrt, metal::sqrt(x))
FA_EMU_BUILTIN_UNARY(tan, metal::tan(x))
FA_EMU_BUILTIN_UNARY(tanh, metal::tanh(x))
FA_EMU_BUILTIN_UNARY(tanpi, T(__builtin_tanf(M_PI_F * float(x))))
FA_EMU_BUILTIN_UNARY(trunc, metal::trunc(x))
FA_EMU_BUILTIN_BINARY(atan2, metal::atan2(x, y))
FA_EMU_BUILTIN_BINARY(divide, x / y)
FA_EMU_BUILTIN_BINARY(fmax, metal::fmax(x, y))
FA_EMU_BUILTIN_BINARY(fmin, metal::fmin(x, y))
FA_EMU_BUILTIN_BINARY(fmod, metal::fmod(x, y))
FA_EMU_BUILTIN_BINARY(pow, metal::pow(x, y))
FA_EMU_BUILTIN_BINARY(powr, metal::powr(x, y))
#undef FA_EMU_BUILTIN_UNARY
#undef FA_EMU_BUILTIN_BINARY

template <class T>
T __metal_fmax3(T x, T y, T z, bool) {
  return metal::fmax(metal::fmax(x, y), z);
}
template <class T>
T __metal_fmin3(T x, T y, T z, bool) {
  return metal::fmin(metal::fmin(x, y), z);
}
template <class T>
T __metal_fmedian3(T x, T y, T z, bool) {
  return metal::fmax(metal::fmin(x, y), metal::fmin(metal::fmax(x, y), z));
}
template <class T>
T __metal_fma(T x, T y, T z) {
  return metal::fma(x, y, z);
}
template <class T>
T __metal_frexp(T x, int* exponent) {
  return T(__builtin_frexpf(float(x), exponent));
}
template <class T>
T __metal_ldexp(T x, int k, bool) {
  return T(__builtin_ldexpf(float(x), k));
}
template <class T>
T __metal_nextafter(T x, T y) {
  return T(__builtin_nextafterf(float(x), float(y)));
}

// The size query takes a value of the type it returns.
template <class T>
T __metal_get_simdgroup_size(T) {
  return T(32);
}

#define FA_EMU_BUILTIN_SIMD(name)                                       \
  template <class T, class Arg>                                         \
  T __metal_##name(T data, Arg arg, FA_EMU_SITE()) {                    \
    return metal::name(data, metal::ushort(arg), fa_emu_file, fa_emu_line); \
  }
FA_EMU_BUILTIN_SIMD(simd_broadcast)
FA_EMU_BUILTIN_SIMD(simd_shuffle)
FA_EMU_BUILTIN_SIMD(simd_shuffle_down)
FA_EMU_BUILTIN_SIMD(simd_shuffle_up)
FA_EMU_BUILTIN_SIMD(simd_shuffle_xor)
FA_EMU_BUILTIN_SIMD(simd_shuffle_rotate_down)
FA_EMU_BUILTIN_SIMD(simd_shuffle_rotate_up)
#undef FA_EMU_BUILTIN_SIMD

#define FA_EMU_BUILTIN_SIMD_REDUCTION(name)            \
  template <class T>                                   \
  T __metal_##name(T data, FA_EMU_SITE()) {            \
    return metal::name(data, fa_emu_file, fa_emu_line); \
  }
FA_EMU_BUILTIN_SIMD_REDUCTION(simd_sum)
FA_EMU_BUILTIN_SIMD_REDUCTION(simd_product)
FA_EMU_BUILTIN_SIMD_REDUCTION(simd_max)
FA_EMU_BUILTIN_SIMD_REDUCTION(simd_min)
FA_EMU_BUILTIN_SIMD_REDUCTION(simd_prefix_inclusive_sum)
FA_EMU_BUILTIN_SIMD_REDUCTION(simd_prefix_exclusive_sum)
FA_EMU_BUILTIN_SIMD_REDUCTION(simd_prefix_inclusive_product)
FA_EMU_BUILTIN_SIMD_REDUCTION(simd_prefix_exclusive_product)
#undef FA_EMU_BUILTIN_SIMD_REDUCTION

// The bitwise reduction of a floating value (bf16_math.h gives bfloat one
// through float) works on its bits.
template <class T>
T __metal_simd_xor(T data, FA_EMU_SITE()) {
  if constexpr (std::is_integral<T>::value) {
    return metal::simd_xor(data, fa_emu_file, fa_emu_line);
  } else {
    typedef typename std::conditional<sizeof(T) == 4, metal::uint, metal::ushort>::type Bits;
    return metal::as_type<T>(
        metal::simd_xor(metal::as_type<Bits>(data), fa_emu_file, fa_emu_line));
  }
}

template <class T>
T __metal_simd_shuffle_and_fill_down(T data, T filling, metal::ushort delta, metal::ushort modulo,
                                     FA_EMU_SITE()) {
  return metal::simd_shuffle_and_fill_down(data, filling, delta, modulo, fa_emu_file,
                                          fa_emu_line);
}
template <class T>
T __metal_simd_shuffle_and_fill_up(T data, T filling, metal::ushort delta, metal::ushort modulo,
                                   FA_EMU_SITE()) {
  return metal::simd_shuffle_and_fill_up(data, filling, delta, modulo, fa_emu_file,
                                        fa_emu_line);
}
