// Stub of an Apple system header, for tests/metal_host/check_metal_host.py
// alone (see objc/runtime.h).
#pragma once

// The macOS build's view of the target: MTLDevice.hpp declares some of
// MTL::Device only `#if TARGET_OS_OSX` (an undefined macro would read as 0).
#define TARGET_OS_OSX 1
