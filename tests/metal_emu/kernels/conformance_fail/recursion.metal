// Must fail the conformance pass with [recursion] only: two functions that
// call each other, and two templates that do (seen in their instantiations:
// the templates themselves name no function yet). A function that calls
// only itself is in the vocabulary (MLX's utils.h does).
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
int pong(int n);

template <int kStep>
int ping(int n) { // FORBIDDEN
  return n <= 0 ? 0 : 1 + pong<kStep>(n - kStep);
}

template <int kStep>
int pong(int n) {
  return n <= 0 ? 0 : 1 + ping<kStep>(n - kStep);
}

[[kernel]] void steps(
    device int* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  out[tid] = even_steps(int(tid)) + ping<2>(int(tid));
}
