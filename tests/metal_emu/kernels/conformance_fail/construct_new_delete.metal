// Must fail the conformance pass with [construct] only: `new` and `delete`.
#include <metal_stdlib>

using namespace metal;

[[kernel]] void allocate(
    device float* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  thread float* scratch = new float(out[tid]); // FORBIDDEN
  out[tid] = *scratch;
  delete scratch; // FORBIDDEN
}
