// Must fail the conformance pass with [function-pointer] only: a pointer to
// a function, taken and called.
#include <metal_stdlib>

using namespace metal;

float twice(float x) {
  return 2.0f * x;
}

[[kernel]] void apply(
    device float* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  float (*op)(float) = &twice; // FORBIDDEN
  out[tid] = op(out[tid]);
}
