// Stub of an Apple system header, for tests/metal_host/check_metal_host.py
// alone (see objc/runtime.h).
#pragma once

// The real header includes these C headers, and metal-cpp relies on that
// (MTLAccelerationStructureTypes.hpp uses INFINITY from <math.h>).
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef double CFTimeInterval;
typedef const struct __CFString* CFStringRef;

// Named by NS::MakeConstantString (instantiated only if used).
extern "C" CFStringRef __CFStringMakeConstantString(const char* cStr);
