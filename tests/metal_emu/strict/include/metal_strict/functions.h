// Declarations of Metal's math, relational, simdgroup and synchronisation
// functions, generic over the element type as the overload sets in Metal's
// headers are.
#pragma once

#include "types.h"

namespace metal {

#define FA_STRICT_UNARY(name) \
  template <class T>          \
  T name(T x);
#define FA_STRICT_BINARY(name) \
  template <class T>           \
  T name(T x, T y);

FA_STRICT_UNARY(abs)
FA_STRICT_UNARY(acos)
FA_STRICT_UNARY(asin)
FA_STRICT_UNARY(atan)
FA_STRICT_UNARY(ceil)
FA_STRICT_UNARY(cos)
FA_STRICT_UNARY(cosh)
FA_STRICT_UNARY(erf)
FA_STRICT_UNARY(exp)
FA_STRICT_UNARY(exp10)
FA_STRICT_UNARY(exp2)
FA_STRICT_UNARY(fabs)
FA_STRICT_UNARY(floor)
FA_STRICT_UNARY(fract)
FA_STRICT_UNARY(log)
FA_STRICT_UNARY(log10)
FA_STRICT_UNARY(log2)
FA_STRICT_UNARY(rint)
FA_STRICT_UNARY(round)
FA_STRICT_UNARY(rsqrt)
FA_STRICT_UNARY(saturate)
FA_STRICT_UNARY(sign)
FA_STRICT_UNARY(sin)
FA_STRICT_UNARY(sinh)
FA_STRICT_UNARY(sqrt)
FA_STRICT_UNARY(tan)
FA_STRICT_UNARY(tanh)
FA_STRICT_UNARY(trunc)
FA_STRICT_BINARY(atan2)
FA_STRICT_BINARY(copysign)
FA_STRICT_BINARY(fmax)
FA_STRICT_BINARY(fmin)
FA_STRICT_BINARY(fmod)
FA_STRICT_BINARY(max)
FA_STRICT_BINARY(min)
FA_STRICT_BINARY(pow)
FA_STRICT_BINARY(powr)
FA_STRICT_BINARY(step)
#undef FA_STRICT_UNARY
#undef FA_STRICT_BINARY

template <class T>
T fma(T a, T b, T c);
template <class T, class S>
T clamp(T x, S lo, S hi);
template <class T, class A>
T mix(T x, T y, A a);
template <class T, class C>
T select(T a, T b, C c);
template <class T>
auto isnan(T x) -> decltype(x != x);
template <class T>
auto isinf(T x) -> decltype(x != x);
template <class T>
auto isfinite(T x) -> decltype(x != x);
template <class T>
auto signbit(T x) -> decltype(x != x);
template <class V>
bool all(V v);
template <class V>
bool any(V v);
template <class V>
auto dot(V a, V b) -> decltype(a.x);
template <class To, class From>
To as_type(From x);

#define FA_STRICT_MATH_NAMES \
  using metal::abs;          \
  using metal::ceil;         \
  using metal::clamp;        \
  using metal::cos;          \
  using metal::exp;          \
  using metal::exp10;        \
  using metal::exp2;         \
  using metal::fabs;         \
  using metal::floor;        \
  using metal::fma;          \
  using metal::fmax;         \
  using metal::fmin;         \
  using metal::isinf;        \
  using metal::isnan;        \
  using metal::log;          \
  using metal::log2;         \
  using metal::max;          \
  using metal::min;          \
  using metal::pow;          \
  using metal::powr;         \
  using metal::rsqrt;        \
  using metal::sin;          \
  using metal::sqrt;         \
  using metal::tanh;
namespace fast {
FA_STRICT_MATH_NAMES
} // namespace fast
namespace precise {
FA_STRICT_MATH_NAMES
} // namespace precise
#undef FA_STRICT_MATH_NAMES

template <class T>
T simd_shuffle(T data, ushort lane);
template <class T>
T simd_shuffle_xor(T data, ushort mask);
template <class T>
T simd_shuffle_down(T data, ushort delta);
template <class T>
T simd_shuffle_up(T data, ushort delta);
template <class T>
T simd_shuffle_rotate_down(T data, ushort delta);
template <class T>
T simd_shuffle_rotate_up(T data, ushort delta);
template <class T>
T simd_shuffle_and_fill_down(T data, T filling_data, ushort delta);
template <class T>
T simd_shuffle_and_fill_down(T data, T filling_data, ushort delta, ushort modulo);
template <class T>
T simd_shuffle_and_fill_up(T data, T filling_data, ushort delta);
template <class T>
T simd_shuffle_and_fill_up(T data, T filling_data, ushort delta, ushort modulo);
template <class T>
T simd_broadcast(T data, ushort lane);
template <class T>
T simd_broadcast_first(T data);
template <class T>
T simd_sum(T data);
template <class T>
T simd_product(T data);
template <class T>
T simd_max(T data);
template <class T>
T simd_min(T data);
template <class T>
T simd_and(T data);
template <class T>
T simd_or(T data);
template <class T>
T simd_xor(T data);
template <class T>
T simd_prefix_inclusive_sum(T data);
template <class T>
T simd_prefix_exclusive_sum(T data);
template <class T>
T simd_prefix_inclusive_product(T data);
template <class T>
T simd_prefix_exclusive_product(T data);
bool simd_all(bool expr);
bool simd_any(bool expr);
bool simd_is_first();

enum class mem_flags : unsigned {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4,
  mem_threadgroup_imageblock = 8,
  mem_object_data = 16,
};
constexpr mem_flags operator|(mem_flags a, mem_flags b) {
  return mem_flags(unsigned(a) | unsigned(b));
}
void threadgroup_barrier(mem_flags flags);
void simdgroup_barrier(mem_flags flags);

} // namespace metal
