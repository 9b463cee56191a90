// Must fail the conformance pass with [construct] only: a `throw`.
#include <metal_stdlib>

using namespace metal;

[[kernel]] void checked(
    device float* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  if (out[tid] < 0.0f) {
    throw 1; // FORBIDDEN
  }
}
