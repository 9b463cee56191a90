// Apple's compiler builtins (`__metal_*`) that the bodies of Metal's
// standard headers call, and the macros those headers define around them.
// MLX's bf16_math.h calls them directly to give bfloat its math and simd
// overloads, so a unit including MLX's headers needs them declared. The
// builtins are generic over the element type, as the overloads they
// implement are; `fast` selects the fast-math variant.
#pragma once

#include "types.h"

#define METAL_FUNC inline __attribute__((__always_inline__))
#define __METAL_FAST_MATH__ true
#define __METAL_PRECISE_MATH__ false
#if defined(__FAST_MATH__)
#define __METAL_MAYBE_FAST_MATH__ __METAL_FAST_MATH__
#else
#define __METAL_MAYBE_FAST_MATH__ __METAL_PRECISE_MATH__
#endif

#define FA_STRICT_BUILTIN_UNARY(name) \
  template <class T>                  \
  T __metal_##name(T x, bool fast);
#define FA_STRICT_BUILTIN_BINARY(name) \
  template <class T>                   \
  T __metal_##name(T x, T y, bool fast);
#define FA_STRICT_BUILTIN_TERNARY(name) \
  template <class T>                    \
  T __metal_##name(T x, T y, T z, bool fast);

FA_STRICT_BUILTIN_UNARY(acos)
FA_STRICT_BUILTIN_UNARY(acosh)
FA_STRICT_BUILTIN_UNARY(asin)
FA_STRICT_BUILTIN_UNARY(asinh)
FA_STRICT_BUILTIN_UNARY(atan)
FA_STRICT_BUILTIN_UNARY(atanh)
FA_STRICT_BUILTIN_UNARY(ceil)
FA_STRICT_BUILTIN_UNARY(cos)
FA_STRICT_BUILTIN_UNARY(cosh)
FA_STRICT_BUILTIN_UNARY(cospi)
FA_STRICT_BUILTIN_UNARY(exp)
FA_STRICT_BUILTIN_UNARY(exp10)
FA_STRICT_BUILTIN_UNARY(exp2)
FA_STRICT_BUILTIN_UNARY(fabs)
FA_STRICT_BUILTIN_UNARY(floor)
FA_STRICT_BUILTIN_UNARY(fract)
FA_STRICT_BUILTIN_UNARY(log)
FA_STRICT_BUILTIN_UNARY(log10)
FA_STRICT_BUILTIN_UNARY(log2)
FA_STRICT_BUILTIN_UNARY(rint)
FA_STRICT_BUILTIN_UNARY(round)
FA_STRICT_BUILTIN_UNARY(rsqrt)
FA_STRICT_BUILTIN_UNARY(sin)
FA_STRICT_BUILTIN_UNARY(sinh)
FA_STRICT_BUILTIN_UNARY(sinpi)
FA_STRICT_BUILTIN_UNARY(sqrt)
FA_STRICT_BUILTIN_UNARY(tan)
FA_STRICT_BUILTIN_UNARY(tanh)
FA_STRICT_BUILTIN_UNARY(tanpi)
FA_STRICT_BUILTIN_UNARY(trunc)
FA_STRICT_BUILTIN_BINARY(atan2)
FA_STRICT_BUILTIN_BINARY(divide)
FA_STRICT_BUILTIN_BINARY(fmax)
FA_STRICT_BUILTIN_BINARY(fmin)
FA_STRICT_BUILTIN_BINARY(fmod)
FA_STRICT_BUILTIN_BINARY(pow)
FA_STRICT_BUILTIN_BINARY(powr)
FA_STRICT_BUILTIN_TERNARY(fmax3)
FA_STRICT_BUILTIN_TERNARY(fmedian3)
FA_STRICT_BUILTIN_TERNARY(fmin3)
#undef FA_STRICT_BUILTIN_UNARY
#undef FA_STRICT_BUILTIN_BINARY
#undef FA_STRICT_BUILTIN_TERNARY

template <class T>
T __metal_fma(T x, T y, T z);
template <class T>
T __metal_frexp(T x, int* exponent);
template <class T>
T __metal_ldexp(T x, int k, bool fast);
template <class T>
T __metal_nextafter(T x, T y);

// The simdgroup builtins; the size and lane queries take a value of the
// type they return.
template <class T>
T __metal_get_simdgroup_size(T);
template <class T>
T __metal_get_thread_index_in_simdgroup(T);
template <class T>
T __metal_simd_broadcast(T data, metal::ushort lane);
template <class T>
T __metal_simd_shuffle(T data, metal::ushort lane);
template <class T>
T __metal_simd_shuffle_down(T data, metal::ushort delta);
template <class T>
T __metal_simd_shuffle_up(T data, metal::ushort delta);
template <class T>
T __metal_simd_shuffle_xor(T data, metal::ushort mask);
template <class T>
T __metal_simd_shuffle_rotate_down(T data, metal::ushort delta);
template <class T>
T __metal_simd_shuffle_rotate_up(T data, metal::ushort delta);
template <class T>
T __metal_simd_shuffle_and_fill_down(T data, T filling, metal::ushort delta, metal::ushort modulo);
template <class T>
T __metal_simd_shuffle_and_fill_up(T data, T filling, metal::ushort delta, metal::ushort modulo);
template <class T>
T __metal_simd_sum(T data);
template <class T>
T __metal_simd_product(T data);
template <class T>
T __metal_simd_max(T data);
template <class T>
T __metal_simd_min(T data);
template <class T>
T __metal_simd_xor(T data);
template <class T>
T __metal_simd_prefix_inclusive_sum(T data);
template <class T>
T __metal_simd_prefix_exclusive_sum(T data);
template <class T>
T __metal_simd_prefix_inclusive_product(T data);
template <class T>
T __metal_simd_prefix_exclusive_product(T data);
