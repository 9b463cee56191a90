// Must fail the conformance pass with [construct] only: a lambda and a
// do-while loop, constructs no entry of the vocabulary allows.
#include <metal_stdlib>

using namespace metal;

[[kernel]] void twice(
    device float* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  auto scale = [](float x) { return 2.0f * x; }; // FORBIDDEN
  int n = 0;
  do { // FORBIDDEN
    n += 1;
  } while (n < 2);
  out[tid] = scale(out[tid]) + float(n);
}
