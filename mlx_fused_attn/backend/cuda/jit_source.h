// The CUDA kernel sources, one text a kernel family (its .cuh entry points
// and every header they include), flattened at build time
// (cmake/flatten_source.py, run by cmake/cuda.cmake) and compiled by NVRTC
// when the JIT is chosen.
#pragma once

#include <string>

namespace mlx_fused_attn::cuda {

/// The family's text (family_name: "attention", "short_attention",
/// "neighborhood", "strided_copy"), or nullptr for another name.
const char* jit_source(const std::string& family);

} // namespace mlx_fused_attn::cuda
