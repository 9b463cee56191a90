// Macros the Metal standard library defines for function declarations.
#pragma once

// Metal's is `inline __attribute__((__always_inline__))`. Forced inlining
// changes no result, only compile time, which on the host (address
// sanitizer, templates of MLX's size) it multiplies: plain `inline` here.
#define METAL_FUNC inline
