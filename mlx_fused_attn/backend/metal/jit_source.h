// The Metal kernel sources, flattened to one ASCII text at build time
// (metal/flatten_source.py, run by cmake/metal.cmake) and compiled at run
// time when the JIT is chosen.
#pragma once

namespace mlx_fused_attn::metal {

const char* jit_source();

} // namespace mlx_fused_attn::metal
