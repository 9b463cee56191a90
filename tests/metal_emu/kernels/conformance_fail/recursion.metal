// Must fail the conformance pass with [recursion] only: two functions that
// call each other, and a template that calls itself (seen in its
// instantiation: the template itself names no function yet).
#include <metal_stdlib>

using namespace metal;

int odd_steps(int n); // FORBIDDEN

int even_steps(int n) {
  return n == 0 ? 0 : 1 + odd_steps(n - 1);
}

int odd_steps(int n) {
  return n == 0 ? 0 : 1 + even_steps(n - 1);
}

template <int kStep>
int countdown(int n) { // FORBIDDEN
  return n <= 0 ? 0 : 1 + countdown<kStep>(n - kStep);
}

[[kernel]] void steps(
    device int* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  out[tid] = even_steps(int(tid)) + countdown<2>(int(tid));
}
