// Stub of an Apple system header, for tests/metal_host/check_metal_host.py
// alone (see objc/runtime.h).
#pragma once

#include <objc/runtime.h>

// Declared as Apple declares them; metal-cpp casts them to the signature of
// each message (the _fpret and _stret variants on x86 hosts).
extern "C" {
void objc_msgSend(void);
void objc_msgSend_fpret(void);
void objc_msgSend_stret(void);
}
