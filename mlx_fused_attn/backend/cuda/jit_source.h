// The CUDA kernel sources (attention_kernel.cuh, strided_copy_kernel.cuh,
// poison_kernel.cuh and every header they include), flattened to one text
// at build time (metal/flatten_source.py, run by cmake/cuda.cmake) and
// compiled by NVRTC when the JIT is chosen.
#pragma once

namespace mlx_fused_attn::cuda {

const char* jit_source();

} // namespace mlx_fused_attn::cuda
