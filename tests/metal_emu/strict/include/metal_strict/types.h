// Scalar and vector types. half is _Float16. bfloat is __fp16, clang's
// other 16-bit type: clang 14 allows no arithmetic on __bf16, and a
// distinct type keeps half and bfloat overloads apart. Vectors are clang
// ext vectors (swizzles and operators as in Metal); Metal's constructor
// syntax, float4(a, b, c, d), goes through one function-like macro per
// vector type name.
#pragma once

#define FA_STRICT_DEVICE __attribute__((address_space(1)))
#define FA_STRICT_CONSTANT __attribute__((address_space(2)))
#define FA_STRICT_THREADGROUP __attribute__((address_space(3)))

namespace metal {

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
typedef _Float16 half;
typedef __fp16 bfloat;
typedef char int8_t;
typedef uchar uint8_t;
typedef short int16_t;
typedef ushort uint16_t;
typedef int int32_t;
typedef uint uint32_t;
typedef long int64_t;
typedef ulong uint64_t;

template <class T, int N>
using vec = T __attribute__((ext_vector_type(N)));

namespace strict {
/// Builds a vector from scalars and vectors, as Metal's constructors do.
template <class V, class... A>
V make_vector(A... parts);
} // namespace strict

#define FA_STRICT_VECTORS(T, name) \
  typedef vec<T, 2> name##2;       \
  typedef vec<T, 3> name##3;       \
  typedef vec<T, 4> name##4;

// clang has no bool vectors; its vector comparisons yield int vectors.
FA_STRICT_VECTORS(int, bool)
FA_STRICT_VECTORS(char, char)
FA_STRICT_VECTORS(uchar, uchar)
FA_STRICT_VECTORS(short, short)
FA_STRICT_VECTORS(ushort, ushort)
FA_STRICT_VECTORS(int, int)
FA_STRICT_VECTORS(uint, uint)
FA_STRICT_VECTORS(long, long)
FA_STRICT_VECTORS(ulong, ulong)
FA_STRICT_VECTORS(half, half)
FA_STRICT_VECTORS(bfloat, bfloat)
FA_STRICT_VECTORS(float, float)
#undef FA_STRICT_VECTORS

} // namespace metal


#define bool2(...) ::metal::strict::make_vector<::metal::bool2>(__VA_ARGS__)
#define bool3(...) ::metal::strict::make_vector<::metal::bool3>(__VA_ARGS__)
#define bool4(...) ::metal::strict::make_vector<::metal::bool4>(__VA_ARGS__)
#define char2(...) ::metal::strict::make_vector<::metal::char2>(__VA_ARGS__)
#define char3(...) ::metal::strict::make_vector<::metal::char3>(__VA_ARGS__)
#define char4(...) ::metal::strict::make_vector<::metal::char4>(__VA_ARGS__)
#define uchar2(...) ::metal::strict::make_vector<::metal::uchar2>(__VA_ARGS__)
#define uchar3(...) ::metal::strict::make_vector<::metal::uchar3>(__VA_ARGS__)
#define uchar4(...) ::metal::strict::make_vector<::metal::uchar4>(__VA_ARGS__)
#define short2(...) ::metal::strict::make_vector<::metal::short2>(__VA_ARGS__)
#define short3(...) ::metal::strict::make_vector<::metal::short3>(__VA_ARGS__)
#define short4(...) ::metal::strict::make_vector<::metal::short4>(__VA_ARGS__)
#define ushort2(...) ::metal::strict::make_vector<::metal::ushort2>(__VA_ARGS__)
#define ushort3(...) ::metal::strict::make_vector<::metal::ushort3>(__VA_ARGS__)
#define ushort4(...) ::metal::strict::make_vector<::metal::ushort4>(__VA_ARGS__)
#define int2(...) ::metal::strict::make_vector<::metal::int2>(__VA_ARGS__)
#define int3(...) ::metal::strict::make_vector<::metal::int3>(__VA_ARGS__)
#define int4(...) ::metal::strict::make_vector<::metal::int4>(__VA_ARGS__)
#define uint2(...) ::metal::strict::make_vector<::metal::uint2>(__VA_ARGS__)
#define uint3(...) ::metal::strict::make_vector<::metal::uint3>(__VA_ARGS__)
#define uint4(...) ::metal::strict::make_vector<::metal::uint4>(__VA_ARGS__)
#define long2(...) ::metal::strict::make_vector<::metal::long2>(__VA_ARGS__)
#define long3(...) ::metal::strict::make_vector<::metal::long3>(__VA_ARGS__)
#define long4(...) ::metal::strict::make_vector<::metal::long4>(__VA_ARGS__)
#define ulong2(...) ::metal::strict::make_vector<::metal::ulong2>(__VA_ARGS__)
#define ulong3(...) ::metal::strict::make_vector<::metal::ulong3>(__VA_ARGS__)
#define ulong4(...) ::metal::strict::make_vector<::metal::ulong4>(__VA_ARGS__)
#define half2(...) ::metal::strict::make_vector<::metal::half2>(__VA_ARGS__)
#define half3(...) ::metal::strict::make_vector<::metal::half3>(__VA_ARGS__)
#define half4(...) ::metal::strict::make_vector<::metal::half4>(__VA_ARGS__)
#define bfloat2(...) ::metal::strict::make_vector<::metal::bfloat2>(__VA_ARGS__)
#define bfloat3(...) ::metal::strict::make_vector<::metal::bfloat3>(__VA_ARGS__)
#define bfloat4(...) ::metal::strict::make_vector<::metal::bfloat4>(__VA_ARGS__)
#define float2(...) ::metal::strict::make_vector<::metal::float2>(__VA_ARGS__)
#define float3(...) ::metal::strict::make_vector<::metal::float3>(__VA_ARGS__)
#define float4(...) ::metal::strict::make_vector<::metal::float4>(__VA_ARGS__)
