// Metal's math, relational and common functions on scalars and vectors.
// Float versions call the compiler builtins (which also keeps the global
// namespace free of C's double overloads). Half and bfloat versions compute
// in float and round the result, as the GPU's 16-bit math is at least that
// accurate. metal::fast:: and metal::precise:: name the same functions: the
// emulator has one precision.
#pragma once

#include <type_traits>

#include "narrow_float.h"
#include "traits.h"
#include "vec.h"

namespace metal {

#define FA_EMU_MAP_VEC_1(name)                     \
  template <class T, int N>                        \
  vec<T, N> name(const vec<T, N>& x) {             \
    vec<T, N> r;                                   \
    for (int i = 0; i < N; ++i) {                  \
      r[i] = name(x[i]);                           \
    }                                              \
    return r;                                      \
  }

#define FA_EMU_MAP_VEC_2(name)                                      \
  template <class T, int N>                                         \
  vec<T, N> name(const vec<T, N>& x, const vec<T, N>& y) {          \
    vec<T, N> r;                                                    \
    for (int i = 0; i < N; ++i) {                                   \
      r[i] = name(x[i], y[i]);                                      \
    }                                                               \
    return r;                                                       \
  }                                                                 \
  template <class T, int N>                                         \
  vec<T, N> name(const vec<T, N>& x, T y) {                         \
    return name(x, vec<T, N>(y));                                   \
  }

#define FA_EMU_MAP_VEC_3(name)                                              \
  template <class T, int N>                                                 \
  vec<T, N> name(                                                           \
      const vec<T, N>& x, const vec<T, N>& y, const vec<T, N>& z) {         \
    vec<T, N> r;                                                            \
    for (int i = 0; i < N; ++i) {                                           \
      r[i] = name(x[i], y[i], z[i]);                                        \
    }                                                                       \
    return r;                                                               \
  }

#define FA_EMU_FLOAT_FN_1(name, expr)             \
  inline float name(float x) {                    \
    return expr;                                  \
  }                                               \
  template <class F>                              \
  narrow_float<F> name(narrow_float<F> h) {       \
    return narrow_float<F>(name(float(h)));       \
  }                                               \
  FA_EMU_MAP_VEC_1(name)

#define FA_EMU_FLOAT_FN_2(name, expr)                               \
  inline float name(float x, float y) {                             \
    return expr;                                                    \
  }                                                                 \
  template <class F>                                                \
  narrow_float<F> name(narrow_float<F> a, narrow_float<F> b) {      \
    return narrow_float<F>(name(float(a), float(b)));               \
  }                                                                 \
  FA_EMU_MAP_VEC_2(name)

FA_EMU_FLOAT_FN_1(exp, __builtin_expf(x))
FA_EMU_FLOAT_FN_1(exp2, __builtin_exp2f(x))
FA_EMU_FLOAT_FN_1(exp10, __builtin_powf(10.0f, x))
FA_EMU_FLOAT_FN_1(log, __builtin_logf(x))
FA_EMU_FLOAT_FN_1(log2, __builtin_log2f(x))
FA_EMU_FLOAT_FN_1(log10, __builtin_log10f(x))
FA_EMU_FLOAT_FN_1(sqrt, __builtin_sqrtf(x))
FA_EMU_FLOAT_FN_1(rsqrt, 1.0f / __builtin_sqrtf(x))
FA_EMU_FLOAT_FN_1(sin, __builtin_sinf(x))
FA_EMU_FLOAT_FN_1(cos, __builtin_cosf(x))
FA_EMU_FLOAT_FN_1(tan, __builtin_tanf(x))
FA_EMU_FLOAT_FN_1(sinh, __builtin_sinhf(x))
FA_EMU_FLOAT_FN_1(cosh, __builtin_coshf(x))
FA_EMU_FLOAT_FN_1(tanh, __builtin_tanhf(x))
FA_EMU_FLOAT_FN_1(asin, __builtin_asinf(x))
FA_EMU_FLOAT_FN_1(acos, __builtin_acosf(x))
FA_EMU_FLOAT_FN_1(atan, __builtin_atanf(x))
FA_EMU_FLOAT_FN_1(erf, __builtin_erff(x))
FA_EMU_FLOAT_FN_1(floor, __builtin_floorf(x))
FA_EMU_FLOAT_FN_1(ceil, __builtin_ceilf(x))
FA_EMU_FLOAT_FN_1(round, __builtin_roundf(x))
FA_EMU_FLOAT_FN_1(rint, __builtin_rintf(x))
FA_EMU_FLOAT_FN_1(trunc, __builtin_truncf(x))
FA_EMU_FLOAT_FN_1(fabs, __builtin_fabsf(x))
FA_EMU_FLOAT_FN_1(saturate, __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f))
FA_EMU_FLOAT_FN_1(fract, x - __builtin_floorf(x))
FA_EMU_FLOAT_FN_1(
    sign,
    x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : (x != x ? 0.0f : x)))
FA_EMU_FLOAT_FN_2(pow, __builtin_powf(x, y))
FA_EMU_FLOAT_FN_2(powr, __builtin_powf(x, y))
FA_EMU_FLOAT_FN_2(atan2, __builtin_atan2f(x, y))
FA_EMU_FLOAT_FN_2(fmod, __builtin_fmodf(x, y))
FA_EMU_FLOAT_FN_2(copysign, __builtin_copysignf(x, y))
FA_EMU_FLOAT_FN_2(fmax, __builtin_fmaxf(x, y))
FA_EMU_FLOAT_FN_2(fmin, __builtin_fminf(x, y))
FA_EMU_FLOAT_FN_2(step, y < x ? 0.0f : 1.0f)

inline float fma(float a, float b, float c) {
  return __builtin_fmaf(a, b, c);
}
template <class F>
narrow_float<F> fma(narrow_float<F> a, narrow_float<F> b, narrow_float<F> c) {
  return narrow_float<F>(__builtin_fmaf(float(a), float(b), float(c)));
}
FA_EMU_MAP_VEC_3(fma)

// max/min on floating types follow fmax/fmin (a NaN operand loses);
// integer versions compare.
inline float max(float a, float b) {
  return __builtin_fmaxf(a, b);
}
inline float min(float a, float b) {
  return __builtin_fminf(a, b);
}
template <class F>
narrow_float<F> max(narrow_float<F> a, narrow_float<F> b) {
  return narrow_float<F>(__builtin_fmaxf(float(a), float(b)));
}
template <class F>
narrow_float<F> min(narrow_float<F> a, narrow_float<F> b) {
  return narrow_float<F>(__builtin_fminf(float(a), float(b)));
}
template <class T, typename std::enable_if<std::is_integral<T>::value, int>::type = 0>
constexpr T max(T a, T b) {
  return a < b ? b : a;
}
template <class T, typename std::enable_if<std::is_integral<T>::value, int>::type = 0>
constexpr T min(T a, T b) {
  return b < a ? b : a;
}
FA_EMU_MAP_VEC_2(max)
FA_EMU_MAP_VEC_2(min)

inline float abs(float x) {
  return __builtin_fabsf(x);
}
template <class F>
narrow_float<F> abs(narrow_float<F> x) {
  return narrow_float<F>::from_bits(uint16_t(x.bits & 0x7fffu));
}
template <class T, typename std::enable_if<std::is_integral<T>::value, int>::type = 0>
constexpr T abs(T x) {
  return x < 0 ? T(-x) : x;
}
FA_EMU_MAP_VEC_1(abs)

template <class T>
T clamp(T x, T lo, T hi) {
  return min(max(x, lo), hi);
}
template <class T, int N>
vec<T, N> clamp(const vec<T, N>& x, T lo, T hi) {
  return min(max(x, vec<T, N>(lo)), vec<T, N>(hi));
}

template <class T, class A>
T mix(T x, T y, A a) {
  return x + (y - x) * a;
}

template <class T>
T select(T a, T b, bool c) {
  return c ? b : a;
}
template <class T, int N>
vec<T, N> select(const vec<T, N>& a, const vec<T, N>& b, const vec<bool, N>& c) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) {
    r[i] = c[i] ? b[i] : a[i];
  }
  return r;
}

#define FA_EMU_CLASSIFY(name, expr)                    \
  inline bool name(float x) {                          \
    return expr;                                       \
  }                                                    \
  template <class F>                                   \
  bool name(narrow_float<F> h) {                       \
    return name(float(h));                             \
  }                                                    \
  template <class T, int N>                            \
  vec<bool, N> name(const vec<T, N>& x) {              \
    vec<bool, N> r;                                    \
    for (int i = 0; i < N; ++i) {                      \
      r[i] = name(x[i]);                               \
    }                                                  \
    return r;                                          \
  }

FA_EMU_CLASSIFY(isnan, __builtin_isnan(x))
FA_EMU_CLASSIFY(isinf, __builtin_isinf(x) != 0)
FA_EMU_CLASSIFY(isfinite, __builtin_isfinite(x))
FA_EMU_CLASSIFY(signbit, __builtin_signbit(x) != 0)
#undef FA_EMU_CLASSIFY

template <int N>
bool all(const vec<bool, N>& v) {
  for (int i = 0; i < N; ++i) {
    if (!v[i]) {
      return false;
    }
  }
  return true;
}
template <int N>
bool any(const vec<bool, N>& v) {
  for (int i = 0; i < N; ++i) {
    if (v[i]) {
      return true;
    }
  }
  return false;
}

template <class T, int N>
T dot(const vec<T, N>& a, const vec<T, N>& b) {
  T s = a[0] * b[0];
  for (int i = 1; i < N; ++i) {
    s += a[i] * b[i];
  }
  return s;
}

template <class To, class From>
To as_type(const From& x) {
  static_assert(sizeof(To) == sizeof(From), "as_type needs equal sizes");
  To r;
  __builtin_memcpy(&r, &x, sizeof(To));
  return r;
}

#undef FA_EMU_FLOAT_FN_1
#undef FA_EMU_FLOAT_FN_2
#undef FA_EMU_MAP_VEC_1
#undef FA_EMU_MAP_VEC_2
#undef FA_EMU_MAP_VEC_3

#define FA_EMU_MATH_NAMES                                                    \
  using metal::abs;                                                          \
  using metal::acos;                                                         \
  using metal::asin;                                                         \
  using metal::atan;                                                         \
  using metal::atan2;                                                        \
  using metal::ceil;                                                         \
  using metal::clamp;                                                        \
  using metal::copysign;                                                     \
  using metal::cos;                                                          \
  using metal::cosh;                                                         \
  using metal::exp;                                                          \
  using metal::exp10;                                                        \
  using metal::exp2;                                                         \
  using metal::fabs;                                                         \
  using metal::floor;                                                        \
  using metal::fma;                                                          \
  using metal::fmax;                                                         \
  using metal::fmin;                                                         \
  using metal::fmod;                                                         \
  using metal::fract;                                                        \
  using metal::isfinite;                                                     \
  using metal::isinf;                                                        \
  using metal::isnan;                                                        \
  using metal::log;                                                          \
  using metal::log10;                                                        \
  using metal::log2;                                                         \
  using metal::max;                                                          \
  using metal::min;                                                          \
  using metal::pow;                                                          \
  using metal::powr;                                                         \
  using metal::rint;                                                         \
  using metal::round;                                                        \
  using metal::rsqrt;                                                        \
  using metal::saturate;                                                     \
  using metal::sign;                                                         \
  using metal::sin;                                                          \
  using metal::sinh;                                                         \
  using metal::sqrt;                                                         \
  using metal::tan;                                                          \
  using metal::tanh;                                                         \
  using metal::trunc;

namespace fast {
FA_EMU_MATH_NAMES
} // namespace fast
namespace precise {
FA_EMU_MATH_NAMES
} // namespace precise
#undef FA_EMU_MATH_NAMES

} // namespace metal
