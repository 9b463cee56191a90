// Must fail the conformance pass with [declaration] only.
#include <metal_stdlib>

using namespace metal;

thread_local int calls; // FORBIDDEN

[[kernel]] void count_calls(
    device int* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  calls += 1;
  out[tid] = calls;
}
