// Must fail the conformance pass with [construct] only: a `goto` and its label.
#include <metal_stdlib>

using namespace metal;

[[kernel]] void clamp_negative(
    device float* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  if (out[tid] >= 0.0f) {
    goto done; // FORBIDDEN
  }
  out[tid] = 0.0f;
done: // FORBIDDEN
  out[tid] += 1.0f;
}
