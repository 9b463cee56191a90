// The kernels nvcc built into this library (the AOT build; cmake/cuda.cmake
// compiles them unless MLX_FUSED_ATTN_CUDA_AOT=OFF). Each is returned as its
// host-side handle, which cudaGetFuncBySymbol turns into a driver function
// (kernels.cpp); nullptr where the build holds no such kernel.
#pragma once

#include "mlx_fused_attn/backend/cuda/kernel_names.h"
#include "mlx_fused_attn/kernels/attention_config.h"

namespace mlx_fused_attn::cuda {

const void* aot_attention_kernel(const AttentionKernelKey& key);
const void* aot_strided_copy_kernel(fa::DType dtype);
const void* aot_poison_kernel();

/// One per pair of head dims, each in its own object (attention_aot.cu) so
/// that they build in parallel.
#define FA_DECLARE_AOT_ATTENTION(d, dv)         \
  const void* aot_attention_kernel_d##d##_dv##dv( \
      fa::DType, bool causal, bool mask, bool wgmma, bool large_grid);
FA_ATTENTION_HEAD_DIMS(FA_DECLARE_AOT_ATTENTION)
#undef FA_DECLARE_AOT_ATTENTION

} // namespace mlx_fused_attn::cuda
