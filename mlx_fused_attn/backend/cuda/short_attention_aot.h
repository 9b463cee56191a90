// The nvcc-built short-sequence kernels (the AOT build; cmake/cuda.cmake
// compiles short_attention_aot.cu once per entry of
// FA_SHORT_ATTENTION_HEAD_DIMS, so that the head dims build in parallel).
// Each returns the kernel's host-side handle for (dtype, capacity), which
// kernel_function (kernels.h) turns into a driver function; nullptr for a
// capacity that is not built.
#pragma once

#include "mlx_fused_attn/kernels/short_attention_config.h"

namespace mlx_fused_attn::cuda {

#define FA_DECLARE_AOT_SHORT_ATTENTION(d) \
  const void* aot_short_attention_kernel_d##d(fa::DType dtype, int seq);
FA_SHORT_ATTENTION_HEAD_DIMS(FA_DECLARE_AOT_SHORT_ATTENTION)
#undef FA_DECLARE_AOT_SHORT_ATTENTION

} // namespace mlx_fused_attn::cuda
