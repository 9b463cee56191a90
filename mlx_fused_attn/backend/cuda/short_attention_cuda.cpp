#include "mlx_fused_attn/backend/cuda/short_attention_cuda.h"

#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/short_attention_names.h"
#ifdef MLX_FUSED_ATTN_HAS_CUDA_AOT
#include "mlx_fused_attn/backend/cuda/short_attention_aot.h"
#endif

namespace mlx_fused_attn::cuda {

namespace {

/// The nvcc-built kernel for `key`, nullptr in a build without them.
const void* aot_short_attention_kernel(const ShortAttentionKernelKey& key) {
#ifdef MLX_FUSED_ATTN_HAS_CUDA_AOT
  switch (key.head_dim) {
#define FA_SHORT_AOT_CASE(d) \
  case d:                    \
    return aot_short_attention_kernel_d##d(key.dtype, key.seq);
    FA_SHORT_ATTENTION_HEAD_DIMS(FA_SHORT_AOT_CASE)
#undef FA_SHORT_AOT_CASE
  }
#endif
  (void)key;
  return nullptr;
}

ShortAttentionKernelKey short_key(const AttentionPlan& plan) {
  return {
      plan.dtype,
      plan.params.D,
      std::get<fa::ShortAttnTiles>(plan.tiles).seq};
}

} // namespace

CUfunction
short_attention_function(const AttentionPlan& plan, int device, int arch) {
  const ShortAttentionKernelKey key = short_key(plan);
  return kernel_function(
      KernelFamily::ShortAttention,
      short_attention_kernel_expression(key),
      device,
      arch,
      plan.grid.smem_bytes,
      aot_short_attention_kernel(key));
}

Support short_attention_ready(const AttentionPlan& plan, int device, int arch) {
  return kernel_ready(
      KernelFamily::ShortAttention,
      short_attention_kernel_expression(short_key(plan)),
      device,
      plan.grid.warps * fa::kSimdWidth,
      [&] { return short_attention_function(plan, device, arch); });
}

} // namespace mlx_fused_attn::cuda
