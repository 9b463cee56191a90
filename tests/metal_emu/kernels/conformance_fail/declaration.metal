// Must fail the conformance pass with [declaration] only: the error Apple's
// compiler found at 99b7fa3 ("program scope variable must reside in constant
// address space"), a program-scope `constexpr`; a static data member and a
// function-scope static outside the address spaces the vocabulary allows.
#include <metal_stdlib>

using namespace metal;

constexpr int kWarps = 4; // FORBIDDEN
constant constexpr int kLanes = 32;

struct Shape {
  static constexpr int kRows = 8; // FORBIDDEN
  static constant constexpr int kCols = 8;
};

[[kernel]] void fill(
    device int* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  static int calls = 0; // FORBIDDEN
  calls += 1;
  out[tid] = kWarps * kLanes + Shape::kRows * Shape::kCols + calls;
}
