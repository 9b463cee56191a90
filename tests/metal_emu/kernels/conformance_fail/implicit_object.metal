// Must fail the conformance pass with [implicit-object] only: member functions
// declared for `thread` (no address space), called on an object in
// `constant` memory and on one in `device` memory; Metal needs methods
// declared `const constant` and `const device` for those.
#include <metal_stdlib>

using namespace metal;

struct Scale {
  float factor;
  float apply(float x) const {
    return factor * x;
  }
  operator float() const {
    return factor;
  }
};

[[kernel]] void scale(
    device float* out [[buffer(0)]],
    constant Scale& s [[buffer(1)]],
    const device Scale* per_item [[buffer(2)]],
    uint tid [[thread_position_in_grid]]) {
  float f = per_item[tid]; // FORBIDDEN
  out[tid] = s.apply(out[tid]) + f; // FORBIDDEN
}
