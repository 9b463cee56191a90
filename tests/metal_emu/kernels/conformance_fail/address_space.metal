// Must fail the conformance pass with [address-space] only: the error review
// found in na_grid.h, a `const T*` parameter with no address space, and a
// reference with none.
#include <metal_stdlib>

using namespace metal;

template <typename T>
T first_of(const T* values) { // FORBIDDEN
  return values[0];
}

inline void bump(int& counter) { // FORBIDDEN
  counter += 1;
}

[[kernel]] void pick(
    device float* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  thread float local[2] = {1.0f, 2.0f};
  int n = 0;
  bump(n);
  out[tid] = first_of(local) + float(n);
}
