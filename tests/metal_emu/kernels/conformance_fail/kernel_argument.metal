// Must fail the conformance pass with [kernel-argument] only: a kernel
// argument with no attribute that locates it, one with two, and an attribute
// that is no kernel argument's.
#include <metal_stdlib>

using namespace metal;

[[kernel]] void copy(
    device float* out [[buffer(0)]],
    const device float* in, // FORBIDDEN
    uint tid [[thread_position_in_grid, thread_index_in_threadgroup]], // FORBIDDEN
    uint lane [[thread_index_in_simdgroup, host_name("lane")]]) { // FORBIDDEN
  out[tid] = in[tid] + float(lane);
}
