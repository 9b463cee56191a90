// Must fail the conformance pass with [language-level] only: C++17 features
// the vocabulary does not allow (Metal 3.1 is C++14): an init-statement in an
// `if`, a structured binding, a fold expression, a nested namespace, class
// template argument deduction.
#include <metal_stdlib>

using namespace metal;

namespace outer::inner { // FORBIDDEN
struct Pair {
  int a;
  int b;
};
} // namespace outer::inner

template <typename T>
struct Box {
  T value;
  Box(T v) : value(v) {}
};

template <typename... Ts>
int sum_of(Ts... xs) {
  return (xs + ... + 0); // FORBIDDEN
}

[[kernel]] void combine(
    device int* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  outer::inner::Pair p = {int(tid), 1};
  auto [x, y] = p; // FORBIDDEN
  Box box(x); // FORBIDDEN
  if (int z = x + y; z > 0) { // FORBIDDEN
    out[tid] = sum_of(box.value, y, z);
  }
}
