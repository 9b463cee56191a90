// Must fail the conformance pass with [type] only: a `double` variable.
// (An unsuffixed literal such as 0.5 is a float in Metal and is not one.)
#include <metal_stdlib>

using namespace metal;

[[kernel]] void half_of(
    device float* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  double x = out[tid]; // FORBIDDEN
  out[tid] = float(x) * 0.5;
}
