// Must fail the conformance pass with [attribute] only: attributes that are
// not in the vocabulary, in [[...]] and in __attribute__((...)).
#include <metal_stdlib>

using namespace metal;

[[nodiscard]] int doubled(int x) { // FORBIDDEN
  return 2 * x;
}

__attribute__((noinline)) int tripled(int x) { // FORBIDDEN
  return 3 * x;
}

[[kernel]] void scale(
    device int* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  out[tid] = doubled(out[tid]) + tripled(out[tid]);
}
