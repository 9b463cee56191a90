// Metal's type traits and numeric limits, written out because the strict
// pass compiles freestanding (no C++ standard library for its target).
#pragma once

#include "types.h"

namespace metal {

template <class T, T v>
struct integral_constant {
  static constexpr T value = v;
  typedef T value_type;
  constexpr operator T() const {
    return v;
  }
};
template <bool B>
using bool_constant = integral_constant<bool, B>;
typedef integral_constant<bool, true> true_type;
typedef integral_constant<bool, false> false_type;

template <class T, class U>
struct is_same : false_type {};
template <class T>
struct is_same<T, T> : true_type {};
template <class T, class U>
constexpr bool is_same_v = is_same<T, U>::value;

template <bool B, class T = void>
struct enable_if {};
template <class T>
struct enable_if<true, T> {
  typedef T type;
};
template <bool B, class T = void>
using enable_if_t = typename enable_if<B, T>::type;

template <bool B, class T, class F>
struct conditional {
  typedef T type;
};
template <class T, class F>
struct conditional<false, T, F> {
  typedef F type;
};
template <bool B, class T, class F>
using conditional_t = typename conditional<B, T, F>::type;

// Metal's internal logical traits (`#pragma METAL internals`), as C++'s
// disjunction and conjunction.
template <class... B>
struct _disjunction : false_type {};
template <class B>
struct _disjunction<B> : B {};
template <class B, class... Rest>
struct _disjunction<B, Rest...> : conditional_t<bool(B::value), B, _disjunction<Rest...>> {};
template <class... B>
struct _conjunction : true_type {};
template <class B>
struct _conjunction<B> : B {};
template <class B, class... Rest>
struct _conjunction<B, Rest...> : conditional_t<bool(B::value), _conjunction<Rest...>, B> {};

template <class T>
struct remove_const {
  typedef T type;
};
template <class T>
struct remove_const<const T> {
  typedef T type;
};
template <class T>
struct remove_volatile {
  typedef T type;
};
template <class T>
struct remove_volatile<volatile T> {
  typedef T type;
};
template <class T>
struct remove_cv {
  typedef typename remove_volatile<typename remove_const<T>::type>::type type;
};
template <class T>
struct remove_reference {
  typedef T type;
};
template <class T>
struct remove_reference<T&> {
  typedef T type;
};
template <class T>
struct remove_pointer {
  typedef T type;
};
template <class T>
struct remove_pointer<T*> {
  typedef T type;
};
// Metal's thread address space is clang's default one here.
template <class T>
struct remove_addrspace {
  typedef T type;
};
template <class T>
struct remove_addrspace<FA_STRICT_DEVICE T> {
  typedef T type;
};
template <class T>
struct remove_addrspace<FA_STRICT_CONSTANT T> {
  typedef T type;
};
template <class T>
struct remove_addrspace<FA_STRICT_THREADGROUP T> {
  typedef T type;
};
template <class T>
using remove_addrspace_t = typename remove_addrspace<T>::type;
template <class T>
using remove_const_t = typename remove_const<T>::type;
template <class T>
using remove_cv_t = typename remove_cv<T>::type;
template <class T>
using remove_reference_t = typename remove_reference<T>::type;
template <class T>
using remove_pointer_t = typename remove_pointer<T>::type;

template <class From, class To>
struct is_convertible : integral_constant<bool, __is_convertible_to(From, To)> {};
template <class From, class To>
constexpr bool is_convertible_v = is_convertible<From, To>::value;

template <class T>
struct is_pointer : false_type {};
template <class T>
struct is_pointer<T*> : true_type {};
template <class T>
constexpr bool is_pointer_v = is_pointer<T>::value;

template <class T>
struct is_floating_point_base : false_type {};
template <>
struct is_floating_point_base<float> : true_type {};
template <>
struct is_floating_point_base<half> : true_type {};
template <>
struct is_floating_point_base<bfloat> : true_type {};
template <class T>
struct is_floating_point : is_floating_point_base<remove_cv_t<T>> {};
template <class T>
constexpr bool is_floating_point_v = is_floating_point<T>::value;

template <class T>
struct is_integral_base : false_type {};
#define FA_STRICT_INTEGRAL(T) \
  template <>                 \
  struct is_integral_base<T> : true_type {};
FA_STRICT_INTEGRAL(bool)
FA_STRICT_INTEGRAL(char)
FA_STRICT_INTEGRAL(signed char)
FA_STRICT_INTEGRAL(uchar)
FA_STRICT_INTEGRAL(short)
FA_STRICT_INTEGRAL(ushort)
FA_STRICT_INTEGRAL(int)
FA_STRICT_INTEGRAL(uint)
FA_STRICT_INTEGRAL(long)
FA_STRICT_INTEGRAL(ulong)
FA_STRICT_INTEGRAL(long long)
FA_STRICT_INTEGRAL(unsigned long long)
#undef FA_STRICT_INTEGRAL
template <class T>
struct is_integral : is_integral_base<remove_cv_t<T>> {};
template <class T>
constexpr bool is_integral_v = is_integral<T>::value;

template <class T>
struct is_arithmetic
    : integral_constant<bool, is_integral<T>::value || is_floating_point<T>::value> {
};
template <class T>
struct is_signed : integral_constant<bool, is_arithmetic<T>::value && T(-1) < T(0)> {
};
template <class T>
struct is_unsigned
    : integral_constant<bool, is_arithmetic<T>::value && !(T(-1) < T(0))> {};

template <class T>
struct numeric_limits;

#define FA_STRICT_LIMITS(T, lo, hi, low, eps, inf, nan, den, dig)  \
  template <>                                                      \
  struct numeric_limits<T> {                                       \
    static constexpr bool is_specialized = true;                   \
    static constexpr int digits = dig;                             \
    static constexpr T min() {                                     \
      return T(lo);                                                \
    }                                                              \
    static constexpr T max() {                                     \
      return T(hi);                                                \
    }                                                              \
    static constexpr T lowest() {                                  \
      return T(low);                                               \
    }                                                              \
    static constexpr T epsilon() {                                 \
      return T(eps);                                               \
    }                                                              \
    static constexpr T infinity() {                                \
      return T(inf);                                               \
    }                                                              \
    static constexpr T quiet_NaN() {                               \
      return T(nan);                                               \
    }                                                              \
    static constexpr T denorm_min() {                              \
      return T(den);                                               \
    }                                                              \
  };

FA_STRICT_LIMITS(float, __FLT_MIN__, __FLT_MAX__, -__FLT_MAX__, __FLT_EPSILON__,
                 __builtin_inff(), __builtin_nanf(""), __FLT_DENORM_MIN__, 24)
FA_STRICT_LIMITS(half, 6.103515625e-05f, 65504.0f, -65504.0f, 0.0009765625f,
                 __builtin_inff(), __builtin_nanf(""), 5.9604644775390625e-08f, 11)
FA_STRICT_LIMITS(bfloat, 1.17549435e-38f, 3.38953139e38f, -3.38953139e38f,
                 0.0078125f, __builtin_inff(), __builtin_nanf(""),
                 9.18354962e-41f, 8)
FA_STRICT_LIMITS(int, -2147483647 - 1, 2147483647, -2147483647 - 1, 0, 0, 0, 0, 31)
FA_STRICT_LIMITS(uint, 0u, 4294967295u, 0u, 0, 0, 0, 0, 32)
FA_STRICT_LIMITS(short, -32768, 32767, -32768, 0, 0, 0, 0, 15)
FA_STRICT_LIMITS(ushort, 0, 65535, 0, 0, 0, 0, 0, 16)
FA_STRICT_LIMITS(char, -128, 127, -128, 0, 0, 0, 0, 7)
FA_STRICT_LIMITS(uchar, 0, 255, 0, 0, 0, 0, 0, 8)
FA_STRICT_LIMITS(long, -__LONG_MAX__ - 1, __LONG_MAX__, -__LONG_MAX__ - 1, 0, 0, 0, 0, 63)
FA_STRICT_LIMITS(ulong, 0ul, 2ul * __LONG_MAX__ + 1ul, 0ul, 0, 0, 0, 0, 64)
#undef FA_STRICT_LIMITS

} // namespace metal

#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define HUGE_VALF __builtin_inff()
#define HUGE_VALH (::metal::numeric_limits<::metal::half>::infinity())
#define MAXFLOAT __FLT_MAX__
#define FLT_MAX __FLT_MAX__
#define FLT_MIN __FLT_MIN__
#define FLT_EPSILON __FLT_EPSILON__
#define HALF_MAX (::metal::numeric_limits<::metal::half>::max())
#define HALF_MIN (::metal::numeric_limits<::metal::half>::min())
#define HALF_EPSILON (::metal::numeric_limits<::metal::half>::epsilon())
#define MAXHALF HALF_MAX
#define M_E_F 2.71828182845904523536f
#define M_LOG2E_F 1.44269504088896340736f
#define M_LOG10E_F 0.434294481903251827651f
#define M_LN2_F 0.693147180559945309417f
#define M_LN10_F 2.30258509299404568402f
#define M_PI_F 3.14159265358979323846f
#define M_PI_2_F 1.57079632679489661923f
#define M_PI_4_F 0.785398163397448309616f
#define M_1_PI_F 0.318309886183790671538f
#define M_2_PI_F 0.636619772367581343076f
#define M_2_SQRTPI_F 1.12837916709551257390f
#define M_SQRT2_F 1.41421356237309504880f
#define M_SQRT1_2_F 0.707106781186547524401f
