// Metal's 16-bit floating types, half (IEEE binary16) and bfloat (bfloat16),
// as classes holding the bits. Conversions from float round to nearest even,
// like the GPU; arithmetic goes through float and rounds the result back,
// which gives the correctly rounded binary16 result for + - * / (float has
// more than twice the precision, so the double rounding is harmless).
#pragma once

#include <cstdint>
#include <type_traits>

namespace metal {
namespace emu {

constexpr uint32_t float_bits(float f) {
  return __builtin_bit_cast(uint32_t, f);
}

constexpr float bits_float(uint32_t b) {
  return __builtin_bit_cast(float, b);
}

struct HalfFormat {
  static constexpr uint16_t encode(float f) {
    const uint32_t x = float_bits(f);
    const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {
      // Keep the NaN quiet and its top payload bits.
      return uint16_t(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    // 65520 is halfway between the largest half (65504) and 2^16; ties go
    // to the even neighbour, which is infinity.
    if (ax >= 0x477ff000u) {
      return uint16_t(sign | 0x7c00u);
    }
    const uint32_t e = ax >> 23;
    if (e < 113) {
      // Result is a half subnormal (or zero): count units of 2^-24.
      if (e == 0) {
        return sign;
      }
      const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
      const uint32_t shift = 126 - e;
      if (shift > 24) {
        return sign;
      }
      uint32_t q = m >> shift;
      const uint32_t rem = m & ((1u << shift) - 1u);
      const uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (q & 1u))) {
        ++q;
      }
      return uint16_t(sign | q);
    }
    uint32_t h = ((e - 112) << 10) | ((ax >> 13) & 0x3ffu);
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
      ++h;
    }
    return uint16_t(sign | h);
  }

  static constexpr float decode(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu;
    const uint32_t m = h & 0x3ffu;
    if (e == 0) {
      const float mag = float(m) * 5.9604644775390625e-8f; // m * 2^-24, exact
      return sign ? -mag : mag;
    }
    if (e == 31) {
      return bits_float(sign | 0x7f800000u | (m << 13));
    }
    return bits_float(sign | ((e + 112) << 23) | (m << 13));
  }
};

struct BfloatFormat {
  static constexpr uint16_t encode(float f) {
    const uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
      return uint16_t((x >> 16) | 0x40u);
    }
    return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }

  static constexpr float decode(uint16_t b) {
    return bits_float(uint32_t(b) << 16);
  }
};

} // namespace emu

template <class Format>
struct narrow_float {
  uint16_t bits;

  narrow_float() = default;
  constexpr narrow_float(float f) : bits(Format::encode(f)) {}
  template <
      class T,
      typename std::enable_if<
          std::is_arithmetic<T>::value && !std::is_same<T, float>::value,
          int>::type = 0>
  constexpr narrow_float(T v) : bits(Format::encode(float(v))) {}
  template <class Other>
  explicit constexpr narrow_float(narrow_float<Other> v)
      : bits(Format::encode(float(v))) {}

  constexpr operator float() const {
    return Format::decode(bits);
  }

  static constexpr narrow_float from_bits(uint16_t b) {
    narrow_float r{};
    r.bits = b;
    return r;
  }

  constexpr narrow_float operator-() const {
    return from_bits(uint16_t(bits ^ 0x8000u));
  }
  constexpr narrow_float operator+() const {
    return *this;
  }
  narrow_float& operator++() {
    return *this = float(*this) + 1.0f;
  }
  narrow_float& operator--() {
    return *this = float(*this) - 1.0f;
  }
  narrow_float operator++(int) {
    narrow_float old = *this;
    ++*this;
    return old;
  }
  narrow_float operator--(int) {
    narrow_float old = *this;
    --*this;
    return old;
  }
};

typedef narrow_float<emu::HalfFormat> half;
typedef narrow_float<emu::BfloatFormat> bfloat;

template <class T>
struct is_narrow_float : std::false_type {};
template <class F>
struct is_narrow_float<narrow_float<F>> : std::true_type {};

namespace emu {

// The type of `narrow op other` under Metal's usual arithmetic conversions:
// integers convert to the narrow type, a float operand makes the result float.
// Metal has no double, so an unsuffixed literal acts as a float there.
template <class N, class T, class = void>
struct mixed_result {};
template <class N, class T>
struct mixed_result<
    N,
    T,
    typename std::enable_if<
        std::is_integral<T>::value || std::is_enum<T>::value>::type> {
  typedef N type;
};
template <class N, class T>
struct mixed_result<
    N,
    T,
    typename std::enable_if<std::is_floating_point<T>::value>::type> {
  typedef float type;
};

} // namespace emu

#define FA_EMU_NARROW_BINARY(op)                                           \
  template <class F>                                                       \
  constexpr narrow_float<F> operator op(                                   \
      narrow_float<F> a, narrow_float<F> b) {                              \
    return narrow_float<F>(float(a) op float(b));                          \
  }                                                                        \
  template <class F, class T>                                              \
  constexpr typename emu::mixed_result<narrow_float<F>, T>::type operator op( \
      narrow_float<F> a, T b) {                                            \
    return typename emu::mixed_result<narrow_float<F>, T>::type(           \
        float(a) op float(b));                                             \
  }                                                                        \
  template <class F, class T>                                              \
  constexpr typename emu::mixed_result<narrow_float<F>, T>::type operator op( \
      T a, narrow_float<F> b) {                                            \
    return typename emu::mixed_result<narrow_float<F>, T>::type(           \
        float(a) op float(b));                                             \
  }                                                                        \
  template <class F, class T>                                              \
  narrow_float<F>& operator op##=(narrow_float<F> & a, T b) {              \
    return a = narrow_float<F>(float(a) op float(b));                      \
  }

FA_EMU_NARROW_BINARY(+)
FA_EMU_NARROW_BINARY(-)
FA_EMU_NARROW_BINARY(*)
FA_EMU_NARROW_BINARY(/)
#undef FA_EMU_NARROW_BINARY

#define FA_EMU_NARROW_COMPARE(op)                                          \
  template <class F>                                                       \
  constexpr bool operator op(narrow_float<F> a, narrow_float<F> b) {       \
    return float(a) op float(b);                                           \
  }                                                                        \
  template <                                                               \
      class F,                                                             \
      class T,                                                             \
      typename std::enable_if<std::is_arithmetic<T>::value, int>::type = 0> \
  constexpr bool operator op(narrow_float<F> a, T b) {                     \
    return float(a) op b;                                                  \
  }                                                                        \
  template <                                                               \
      class F,                                                             \
      class T,                                                             \
      typename std::enable_if<std::is_arithmetic<T>::value, int>::type = 0> \
  constexpr bool operator op(T a, narrow_float<F> b) {                     \
    return a op float(b);                                                  \
  }

FA_EMU_NARROW_COMPARE(==)
FA_EMU_NARROW_COMPARE(!=)
FA_EMU_NARROW_COMPARE(<)
FA_EMU_NARROW_COMPARE(<=)
FA_EMU_NARROW_COMPARE(>)
FA_EMU_NARROW_COMPARE(>=)
#undef FA_EMU_NARROW_COMPARE

} // namespace metal
