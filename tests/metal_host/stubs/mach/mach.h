// Stub of an Apple system header, for tests/metal_host/check_metal_host.py
// alone (see objc/runtime.h).
#pragma once

typedef int kern_return_t;
typedef unsigned int mach_port_t;
typedef mach_port_t task_id_token_t;
