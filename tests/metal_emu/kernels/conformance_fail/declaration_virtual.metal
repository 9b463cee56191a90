// Must fail the conformance pass with [declaration] only: a virtual function.
#include <metal_stdlib>

using namespace metal;

struct Scale {
  virtual float apply(float x) const { // FORBIDDEN
    return 2.0f * x;
  }
};

[[kernel]] void scale(
    device float* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  Scale s;
  out[tid] = s.apply(out[tid]);
}
