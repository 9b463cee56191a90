// The Metal kernel sources, one text a kernel family (a .metal file and the
// headers it includes), flattened at build time (cmake/flatten_source.py,
// run by cmake/metal.cmake) and compiled at run time when the JIT is chosen.
#pragma once

#include <string>

namespace mlx_fused_attn::metal {

/// The family's text (family_name: "attention", "short_attention",
/// "neighborhood", "strided_copy"), or nullptr for another name.
const char* jit_source(const std::string& family);

} // namespace mlx_fused_attn::metal
