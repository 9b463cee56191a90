// Metal's <metal_type_traits> and numeric limits. They follow the C++
// standard ones, except that half and bfloat count as floating point.
#pragma once

#include <limits>
#include <type_traits>

#include "narrow_float.h"
#include "vec.h"

namespace metal {

using std::add_const;
using std::add_pointer;
using std::conditional;
using std::conditional_t;
using std::decay;
using std::decay_t;
using std::enable_if;
using std::enable_if_t;
using std::false_type;
using std::integral_constant;
using std::is_const;
using std::is_convertible;
using std::is_enum;
using std::is_integral;
using std::is_pointer;
using std::is_reference;
using std::is_same;
using std::is_signed;
using std::is_unsigned;
using std::is_void;
using std::make_signed;
using std::make_signed_t;
using std::make_unsigned;
using std::make_unsigned_t;
using std::remove_const;
using std::remove_const_t;
using std::remove_cv;
using std::remove_cv_t;
using std::remove_pointer;
using std::remove_pointer_t;
using std::remove_reference;
using std::remove_reference_t;
using std::true_type;

template <class T, class U>
constexpr bool is_same_v = std::is_same<T, U>::value;
template <class T>
constexpr bool is_integral_v = std::is_integral<T>::value;
template <class T>
constexpr bool is_signed_v = std::is_signed<T>::value;
template <class T>
constexpr bool is_unsigned_v = std::is_unsigned<T>::value;
template <class T>
constexpr bool is_pointer_v = std::is_pointer<T>::value;
template <class T>
constexpr bool is_const_v = std::is_const<T>::value;
template <bool B>
using bool_constant = std::integral_constant<bool, B>;
// Types carry no address space on the host.
template <class T>
struct remove_addrspace {
  typedef T type;
};
template <class T>
using remove_addrspace_t = T;
template <class From, class To>
constexpr bool is_convertible_v = std::is_convertible<From, To>::value;

template <class T>
struct is_floating_point
    : integral_constant<
          bool,
          std::is_floating_point<remove_cv_t<T>>::value ||
              is_narrow_float<remove_cv_t<T>>::value> {};
template <class T>
constexpr bool is_floating_point_v = is_floating_point<T>::value;

template <class T>
struct is_arithmetic
    : integral_constant<
          bool,
          std::is_integral<T>::value || is_floating_point<T>::value> {};
template <class T>
constexpr bool is_arithmetic_v = is_arithmetic<T>::value;

template <class T>
struct is_scalar
    : integral_constant<bool, is_arithmetic<T>::value || std::is_enum<T>::value> {
};
template <class T>
constexpr bool is_scalar_v = is_scalar<T>::value;

template <class T>
struct is_vector : false_type {};
template <class T, int N>
struct is_vector<vec<T, N>> : true_type {};
template <class T>
constexpr bool is_vector_v = is_vector<T>::value;

template <class T>
struct numeric_limits : std::numeric_limits<T> {};

template <class F>
struct emu_narrow_limits {
  typedef narrow_float<F> T;
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
};

template <>
struct numeric_limits<half> : emu_narrow_limits<emu::HalfFormat> {
  static constexpr int digits = 11;
  static constexpr half min() {
    return half::from_bits(0x0400);
  }
  static constexpr half max() {
    return half::from_bits(0x7bff);
  }
  static constexpr half lowest() {
    return half::from_bits(0xfbff);
  }
  static constexpr half epsilon() {
    return half::from_bits(0x1400);
  }
  static constexpr half infinity() {
    return half::from_bits(0x7c00);
  }
  static constexpr half quiet_NaN() {
    return half::from_bits(0x7e00);
  }
  static constexpr half denorm_min() {
    return half::from_bits(0x0001);
  }
};

template <>
struct numeric_limits<bfloat> : emu_narrow_limits<emu::BfloatFormat> {
  static constexpr int digits = 8;
  static constexpr bfloat min() {
    return bfloat::from_bits(0x0080);
  }
  static constexpr bfloat max() {
    return bfloat::from_bits(0x7f7f);
  }
  static constexpr bfloat lowest() {
    return bfloat::from_bits(0xff7f);
  }
  static constexpr bfloat epsilon() {
    return bfloat::from_bits(0x3c00);
  }
  static constexpr bfloat infinity() {
    return bfloat::from_bits(0x7f80);
  }
  static constexpr bfloat quiet_NaN() {
    return bfloat::from_bits(0x7fc0);
  }
  static constexpr bfloat denorm_min() {
    return bfloat::from_bits(0x0001);
  }
};

} // namespace metal

#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define HUGE_VALF __builtin_inff()
#define HUGE_VALH (::metal::numeric_limits<::metal::half>::infinity())
#define MAXFLOAT 0x1.fffffep127f
#define FLT_MAX 0x1.fffffep127f
#define FLT_MIN 0x1p-126f
#define FLT_EPSILON 0x1p-23f
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
