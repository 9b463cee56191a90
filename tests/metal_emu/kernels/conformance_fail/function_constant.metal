// Must fail the conformance pass with [function-constant] only: two function
// constants of a translation unit at the same index.
#include <metal_stdlib>

using namespace metal;

constant bool has_bias [[function_constant(3)]];
constant bool has_scale [[function_constant(3)]]; // FORBIDDEN

[[kernel]] void affine(
    device float* out [[buffer(0)]],
    const device float* bias [[buffer(1), function_constant(has_bias)]],
    uint tid [[thread_position_in_grid]]) {
  float x = has_scale ? 2.0f * out[tid] : out[tid];
  out[tid] = has_bias ? x + bias[tid] : x;
}
