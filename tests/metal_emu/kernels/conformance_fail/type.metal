// Must fail the conformance pass with [type] only: builtin types that are not
// in the vocabulary, rejected because nothing allows them (no rule names them).
#include <metal_stdlib>

using namespace metal;

[[kernel]] void widen(
    device int* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  __int128 wide = out[tid]; // FORBIDDEN
  wchar_t letter = 97; // FORBIDDEN
  long double precise = 0.5L; // FORBIDDEN
  out[tid] = int(wide) + int(letter) + int(precise);
}
