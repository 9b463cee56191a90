// Stub of an Apple system header, for tests/metal_host/check_metal_host.py
// alone (see objc/runtime.h).
#pragma once

typedef struct dispatch_queue_s* dispatch_queue_t;
typedef struct dispatch_data_s* dispatch_data_t;
