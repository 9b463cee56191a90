// Stub of an Apple system header, for tests/metal_host/check_metal_host.py
// alone (see objc/runtime.h).
#pragma once

typedef struct __IOSurface* IOSurfaceRef;
