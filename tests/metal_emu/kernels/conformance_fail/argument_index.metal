// Must fail the conformance pass with [argument-index] only: two buffers of a
// kernel at the same index.
#include <metal_stdlib>

using namespace metal;

[[kernel]] void add(
    device float* out [[buffer(0)]],
    const device float* a [[buffer(1)]],
    const device float* b [[buffer(1)]], // FORBIDDEN
    uint tid [[thread_position_in_grid]]) {
  out[tid] = a[tid] + b[tid];
}
