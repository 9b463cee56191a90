// Must fail the conformance pass with [kernel-argument] only: a kernel
// argument with two attributes that locate it, and an attribute that is no
// kernel argument's. (An argument with none is Metal's to place, as MLX's
// softmax kernels have it.)
#include <metal_stdlib>

using namespace metal;

[[kernel]] void copy(
    device float* out [[buffer(0)]],
    const device float* in,
    uint tid [[thread_position_in_grid, thread_index_in_threadgroup]], // FORBIDDEN
    uint lane [[thread_index_in_simdgroup, host_name("lane")]]) { // FORBIDDEN
  out[tid] = in[tid] + float(lane);
}
