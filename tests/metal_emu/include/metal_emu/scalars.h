// Metal's scalar type names that C++ lacks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace metal {

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
using std::size_t;
using std::ptrdiff_t;

} // namespace metal

namespace metal {
namespace emu {

// The last parameter of a member function that Metal qualifies with the
// address space of `this` (`complex_t() threadgroup`, MLX's complex.h),
// added by the build (metal_source.py): the host has one address space, so
// those overloads would repeat the `thread` one; with this parameter they
// are distinct, still compiled, and selected by no call.
template <int AddressSpace>
struct ThisIn {};

} // namespace emu
} // namespace metal
