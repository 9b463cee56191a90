// The Metal kernel sources, one text a kernel family (a .metal file and the
// headers it includes), flattened at build time (cmake/flatten_source.py,
// run by cmake/metal.cmake) and compiled at run time when the JIT is chosen:
// the family's text without its instantiations, plus the one instantiation
// that defines the kernel a call needs.
#pragma once

#include <string>

namespace mlx_fused_attn::metal {

/// The family's text without its kernel instantiations (family_name:
/// "attention", "short_attention", "neighborhood", "strided_copy", ...),
/// or nullptr for another name.
const char* jit_source(const std::string& family);

/// One line of a family's instantiation list (its .metal file's instance
/// block): appended to jit_source, it makes a library of its kernels alone.
struct JitInstance {
  const char* library; ///< the first kernel the line defines: names its library
  const char* line; ///< the instantiation
};

/// The instantiation of `family` that defines the kernel named `kernel`
/// ([[host_name]]), or nullptr where none does.
const JitInstance* jit_instance(
    const std::string& family,
    const std::string& kernel);

} // namespace mlx_fused_attn::metal
