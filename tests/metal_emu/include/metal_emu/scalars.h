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
