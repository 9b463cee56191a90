// Stub of an Apple system header, for tests/metal_host/check_metal_host.py
// alone: it declares what metal-cpp's headers (as MLX includes them) name, so
// that the package's Metal host code can be compiled with -fsyntax-only on
// Linux. Declarations only: nothing here is ever linked or run.
#pragma once

typedef struct objc_class* Class;
typedef struct objc_selector* SEL;
// Complete, as in Apple's objc.h: metal-cpp derives NS::Object from it.
struct objc_object {};

extern "C" Class objc_lookUpClass(const char* name);
