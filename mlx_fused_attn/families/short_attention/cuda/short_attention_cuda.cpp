#include "mlx_fused_attn/families/short_attention/cuda/short_attention_cuda.h"

#include <variant>

#include "mlx_fused_attn/families/short_attention/cuda/short_attention_kernel_key.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"

namespace mlx_fused_attn::cuda {

namespace {

ShortAttentionKernelKey short_key(const AttentionPlan& plan) {
  return {
      plan.dtype, plan.params.D, std::get<fa::ShortAttnTiles>(plan.tiles)};
}

} // namespace

CUfunction
short_attention_function(const AttentionPlan& plan, int device, int arch) {
  return kernel_function(short_key(plan), device, arch);
}

Support short_attention_ready(const AttentionPlan& plan, int device, int arch) {
  return kernel_ready(short_key(plan), device, arch);
}

} // namespace mlx_fused_attn::cuda
