// The nvcc-built neighborhood kernels (na_aot.cu, one object per number of
// spatial axes, so that they build in parallel), as host-side handles that
// cudaGetFuncBySymbol turns into driver functions; nullptr where the build
// holds no such kernel.
#pragma once

#include "mlx_fused_attn/kernels/na_config.h"

namespace mlx_fused_attn::cuda {

#define FA_DECLARE_AOT_NA(n) \
  const void* aot_na_kernel_n##n(fa::DType dtype, int head_dim);
FA_NA_AXES(FA_DECLARE_AOT_NA)
#undef FA_DECLARE_AOT_NA

} // namespace mlx_fused_attn::cuda
