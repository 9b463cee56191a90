// Must fail the conformance pass with [std-header] only: a C library header,
// which Metal's compiler does not have.
#include <metal_stdlib>
#include <stdint.h> // FORBIDDEN

using namespace metal;

[[kernel]] void fill(
    device int* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  out[tid] = int(tid);
}
