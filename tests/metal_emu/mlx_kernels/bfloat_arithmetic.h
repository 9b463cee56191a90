// Included first by every MLX unit. Metal's bfloat arithmetic yields
// bfloat; the strict library's bfloat is clang's __fp16 (clang 14 has no
// arithmetic on __bf16), whose arithmetic yields float, so MLX's braced
// initialisers of bfloat from bfloat expressions, `{a.real * b.real, ...}`
// in complex.h, narrow here where they do not in Metal. The narrowing
// check is off for the MLX units only; the package's kernels keep it.
#pragma clang diagnostic ignored "-Wc++11-narrowing"
