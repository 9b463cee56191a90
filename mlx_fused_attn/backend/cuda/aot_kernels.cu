// The AOT kernels by key: the strided copy and poison kernels live here, the
// attention kernels in one object per head dim (attention_aot.cu).
#include "mlx_fused_attn/backend/cuda/aot_kernels.h"
#include "mlx_fused_attn/backend/cuda/poison_kernel.cuh"
#include "mlx_fused_attn/backend/cuda/strided_copy_kernel.cuh"

namespace mlx_fused_attn::cuda {

const void* aot_attention_kernel(const AttentionKernelKey& key) {
#define FA_AOT_CASE(d, dv)                                                \
  if (key.head_dim == d && key.head_dim_v == dv) {                        \
    return aot_attention_kernel_d##d##_dv##dv(                            \
        key.dtype, key.causal, key.has_mask, key.wgmma, key.large_grid);  \
  }
  FA_ATTENTION_HEAD_DIMS(FA_AOT_CASE)
#undef FA_AOT_CASE
  return nullptr;
}

const void* aot_strided_copy_kernel(fa::DType dtype) {
  switch (dtype) {
    case fa::DType::Float16:
      return reinterpret_cast<const void*>(&fa::strided_copy_kernel<fa::half_t>);
    case fa::DType::BFloat16:
      return reinterpret_cast<const void*>(
          &fa::strided_copy_kernel<fa::bfloat_t>);
    case fa::DType::Float32:
      return reinterpret_cast<const void*>(&fa::strided_copy_kernel<float>);
  }
  return nullptr;
}

const void* aot_poison_kernel() {
  return reinterpret_cast<const void*>(&fa::poison_kernel);
}

} // namespace mlx_fused_attn::cuda
