// Metal's vector types: vec<T, N> for N = 2, 3, 4 with the layout and
// alignment Metal gives them (a 3-vector occupies four elements), named
// components .x .y .z .w (and .r .g .b .a), element access, the common
// swizzles, element-wise operators and explicit conversion between element
// types.
#pragma once

#include <type_traits>

#include "narrow_float.h"

namespace metal {

template <class T, int N>
struct vec;

namespace emu {

template <class T>
struct is_scalar_operand
    : std::integral_constant<
          bool,
          std::is_arithmetic<T>::value || is_narrow_float<T>::value> {};

template <class T>
struct vec_size : std::integral_constant<int, 1> {};
template <class T, int N>
struct vec_size<vec<T, N>> : std::integral_constant<int, N> {};

template <class... A>
struct total_size;
template <>
struct total_size<> : std::integral_constant<int, 0> {};
template <class A, class... R>
struct total_size<A, R...>
    : std::integral_constant<int, vec_size<A>::value + total_size<R...>::value> {
};

// A view of some components of the owning vector's storage, living in the
// same union; reading it builds a vector, assigning to it writes through.
template <class T, int N, int... I>
struct swizzle {
  T v[N];

  operator vec<T, sizeof...(I)>() const {
    return vec<T, sizeof...(I)>(v[I]...);
  }
  swizzle& operator=(const vec<T, sizeof...(I)>& o) {
    const int idx[] = {I...};
    for (int k = 0; k < int(sizeof...(I)); ++k) {
      v[idx[k]] = o[k];
    }
    return *this;
  }
  // A same-typed swizzle copy must go through the components too; the
  // implicit copy would copy the whole storage.
  swizzle& operator=(const swizzle& o) {
    return *this = vec<T, sizeof...(I)>(o);
  }
};

template <class T, int N, int... I>
struct vec_size<swizzle<T, N, I...>>
    : std::integral_constant<int, int(sizeof...(I))> {};

} // namespace emu

#define FA_EMU_COMMA ,
#define FA_EMU_SWZ(name, ...) emu::swizzle<T, N, __VA_ARGS__> name;
#define FA_EMU_SWIZZLES_XY                                             \
  FA_EMU_SWZ(xx, 0, 0)                                                 \
  FA_EMU_SWZ(xy, 0, 1) FA_EMU_SWZ(yx, 1, 0) FA_EMU_SWZ(yy, 1, 1)
#define FA_EMU_SWIZZLES_XYZ                                            \
  FA_EMU_SWIZZLES_XY                                                   \
  FA_EMU_SWZ(xz, 0, 2) FA_EMU_SWZ(zx, 2, 0) FA_EMU_SWZ(yz, 1, 2)       \
  FA_EMU_SWZ(zy, 2, 1) FA_EMU_SWZ(zz, 2, 2) FA_EMU_SWZ(xyz, 0, 1, 2)   \
  FA_EMU_SWZ(zyx, 2, 1, 0)
#define FA_EMU_SWIZZLES_XYZW                                           \
  FA_EMU_SWIZZLES_XYZ                                                  \
  FA_EMU_SWZ(xw, 0, 3) FA_EMU_SWZ(wx, 3, 0) FA_EMU_SWZ(yw, 1, 3)       \
  FA_EMU_SWZ(wy, 3, 1) FA_EMU_SWZ(zw, 2, 3) FA_EMU_SWZ(wz, 3, 2)       \
  FA_EMU_SWZ(ww, 3, 3) FA_EMU_SWZ(yzw, 1, 2, 3)                        \
  FA_EMU_SWZ(xyzw, 0, 1, 2, 3) FA_EMU_SWZ(wzyx, 3, 2, 1, 0)

#define FA_EMU_VEC_STORAGE(N_, names, rgba, swizzles)                  \
  union {                                                              \
    T elems_[N_];                                                      \
    struct {                                                           \
      T names;                                                         \
    };                                                                 \
    struct {                                                           \
      T rgba;                                                          \
    };                                                                 \
    swizzles                                                           \
  };

template <class T, int N>
struct vec_storage;

template <class T>
struct alignas(2 * sizeof(T)) vec_storage<T, 2> {
  static constexpr int N = 2;
  FA_EMU_VEC_STORAGE(2, x FA_EMU_COMMA y, r FA_EMU_COMMA g, FA_EMU_SWIZZLES_XY)
};
template <class T>
struct alignas(4 * sizeof(T)) vec_storage<T, 3> {
  static constexpr int N = 3;
  FA_EMU_VEC_STORAGE(
      3,
      x FA_EMU_COMMA y FA_EMU_COMMA z,
      r FA_EMU_COMMA g FA_EMU_COMMA b,
      FA_EMU_SWIZZLES_XYZ)
};
template <class T>
struct alignas(4 * sizeof(T)) vec_storage<T, 4> {
  static constexpr int N = 4;
  FA_EMU_VEC_STORAGE(
      4,
      x FA_EMU_COMMA y FA_EMU_COMMA z FA_EMU_COMMA w,
      r FA_EMU_COMMA g FA_EMU_COMMA b FA_EMU_COMMA a,
      FA_EMU_SWIZZLES_XYZW)
};

template <class T, int N>
struct vec : vec_storage<T, N> {
  static_assert(N >= 2 && N <= 4, "Metal vectors have 2, 3 or 4 elements");
  using vec_storage<T, N>::elems_;
  typedef T value_type;
  static constexpr int elements = N;

  vec() = default;
  vec(const vec& o) = default;
  vec& operator=(const vec& o) {
    for (int i = 0; i < N; ++i) {
      elems_[i] = o.elems_[i];
    }
    return *this;
  }

  template <
      class S,
      typename std::enable_if<emu::is_scalar_operand<S>::value, int>::type = 0>
  vec(S s) {
    for (int i = 0; i < N; ++i) {
      elems_[i] = static_cast<T>(s);
    }
  }

  template <class U, typename std::enable_if<!std::is_same<U, T>::value, int>::
                         type = 0>
  explicit vec(const vec<U, N>& o) {
    for (int i = 0; i < N; ++i) {
      elems_[i] = static_cast<T>(o[i]);
    }
  }
  template <class U, int M, int... I>
  explicit vec(const emu::swizzle<U, M, I...>& s)
      : vec(s.operator vec<U, int(sizeof...(I))>()) {}

  template <class A0, class A1, class... As>
  vec(const A0& a0, const A1& a1, const As&... as) {
    static_assert(
        emu::total_size<A0, A1, As...>::value == N,
        "vector constructor arguments must supply exactly N components");
    int k = 0;
    put(k, a0);
    put(k, a1);
    const int unused[] = {0, (put(k, as), 0)...};
    (void)unused;
  }

  T& operator[](int i) {
    return elems_[i];
  }
  const T& operator[](int i) const {
    return elems_[i];
  }

 private:
  template <class S>
  void put(int& k, const S& s) {
    elems_[k++] = static_cast<T>(s);
  }
  template <class U, int M>
  void put(int& k, const vec<U, M>& v) {
    for (int i = 0; i < M; ++i) {
      elems_[k++] = static_cast<T>(v[i]);
    }
  }
  template <class U, int M, int... I>
  void put(int& k, const emu::swizzle<U, M, I...>& s) {
    put(k, s.operator vec<U, int(sizeof...(I))>());
  }
};

namespace emu {

// Vectors and swizzles alike take part in vector expressions.
template <class A>
struct vector_of {
  static constexpr bool value = false;
};
template <class T, int N>
struct vector_of<vec<T, N>> {
  static constexpr bool value = true;
  typedef vec<T, N> type;
};
template <class T, int N, int... I>
struct vector_of<swizzle<T, N, I...>> {
  static constexpr bool value = true;
  typedef vec<T, int(sizeof...(I))> type;
};

template <class A, class B, class = void>
struct binary_vector {};
template <class A, class B>
struct binary_vector<
    A,
    B,
    typename std::enable_if<
        vector_of<A>::value && vector_of<B>::value &&
        std::is_same<
            typename vector_of<A>::type,
            typename vector_of<B>::type>::value>::type> {
  typedef typename vector_of<A>::type type;
};
template <class A, class B>
struct binary_vector<
    A,
    B,
    typename std::enable_if<
        vector_of<A>::value && is_scalar_operand<B>::value>::type> {
  typedef typename vector_of<A>::type type;
};
template <class A, class B>
struct binary_vector<
    A,
    B,
    typename std::enable_if<
        is_scalar_operand<A>::value && vector_of<B>::value>::type> {
  typedef typename vector_of<B>::type type;
};

template <class V, class R>
struct rebind;
template <class T, int N, class R>
struct rebind<vec<T, N>, R> {
  typedef vec<R, N> type;
};

} // namespace emu

#define FA_EMU_VEC_BINARY(op, R)                                             \
  template <class A, class B, class V = typename emu::binary_vector<A, B>::type> \
  typename emu::rebind<V, R>::type operator op(const A& a, const B& b) {     \
    const V x(a);                                                            \
    const V y(b);                                                            \
    typename emu::rebind<V, R>::type r;                                      \
    for (int i = 0; i < V::elements; ++i) {                                 \
      r[i] = x[i] op y[i];                                                   \
    }                                                                        \
    return r;                                                                \
  }

#define FA_EMU_VEC_ARITH(op)                                               \
  FA_EMU_VEC_BINARY(op, typename V::value_type)                            \
  template <class T, int N, class S>                                       \
  vec<T, N>& operator op##=(vec<T, N> & a, const S & b) {                  \
    return a = a op b;                                                     \
  }

FA_EMU_VEC_ARITH(+)
FA_EMU_VEC_ARITH(-)
FA_EMU_VEC_ARITH(*)
FA_EMU_VEC_ARITH(/)
FA_EMU_VEC_ARITH(%)
FA_EMU_VEC_ARITH(&)
FA_EMU_VEC_ARITH(|)
FA_EMU_VEC_ARITH(^)
FA_EMU_VEC_ARITH(<<)
FA_EMU_VEC_ARITH(>>)
FA_EMU_VEC_BINARY(==, bool)
FA_EMU_VEC_BINARY(!=, bool)
FA_EMU_VEC_BINARY(<, bool)
FA_EMU_VEC_BINARY(<=, bool)
FA_EMU_VEC_BINARY(>, bool)
FA_EMU_VEC_BINARY(>=, bool)
FA_EMU_VEC_BINARY(&&, bool)
FA_EMU_VEC_BINARY(||, bool)
#undef FA_EMU_VEC_ARITH
#undef FA_EMU_VEC_BINARY

template <class T, int N>
vec<T, N> operator-(const vec<T, N>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) {
    r[i] = -a[i];
  }
  return r;
}
template <class T, int N>
vec<T, N> operator+(const vec<T, N>& a) {
  return a;
}
template <class T, int N>
vec<T, N> operator~(const vec<T, N>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) {
    r[i] = ~a[i];
  }
  return r;
}
template <class T, int N>
vec<bool, N> operator!(const vec<T, N>& a) {
  vec<bool, N> r;
  for (int i = 0; i < N; ++i) {
    r[i] = !a[i];
  }
  return r;
}

#define FA_EMU_VEC_TYPEDEFS(T, name) \
  typedef vec<T, 2> name##2;         \
  typedef vec<T, 3> name##3;         \
  typedef vec<T, 4> name##4;

FA_EMU_VEC_TYPEDEFS(bool, bool)
FA_EMU_VEC_TYPEDEFS(char, char)
FA_EMU_VEC_TYPEDEFS(unsigned char, uchar)
FA_EMU_VEC_TYPEDEFS(short, short)
FA_EMU_VEC_TYPEDEFS(unsigned short, ushort)
FA_EMU_VEC_TYPEDEFS(int, int)
FA_EMU_VEC_TYPEDEFS(unsigned int, uint)
FA_EMU_VEC_TYPEDEFS(long, long)
FA_EMU_VEC_TYPEDEFS(unsigned long, ulong)
FA_EMU_VEC_TYPEDEFS(half, half)
FA_EMU_VEC_TYPEDEFS(bfloat, bfloat)
FA_EMU_VEC_TYPEDEFS(float, float)
#undef FA_EMU_VEC_TYPEDEFS

} // namespace metal
