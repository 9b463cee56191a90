// Run-time compilation of one kernel instance with NVRTC, through an
// on-disk cache. NVRTC is loaded with dlopen (MLX's CUDA backend already
// depends on it, so it is there wherever MLX runs), which keeps this library
// free of a link-time dependency on it.
#pragma once

#include <string>

namespace mlx_fused_attn::cuda {

struct CompiledKernel {
  std::string lowered_name; ///< the mangled name to look the kernel up by
  std::string cubin; ///< machine code for the requested architecture
};

/// Compiles the kernel named by the C++ expression `expression` (e.g.
/// "fa::strided_copy_kernel<float>") from `source` to sm_<arch> machine
/// code. Results are cached on disk under a key of the source's hash, the
/// expression, the architecture and NVRTC's version: in
/// $MLX_FUSED_ATTN_CACHE_DIR, else $XDG_CACHE_HOME/mlx_fused_attn, else
/// ~/.cache/mlx_fused_attn (no caching when none can be written).
CompiledKernel compile_kernel(
    const std::string& source,
    const std::string& expression,
    int arch);

} // namespace mlx_fused_attn::cuda
