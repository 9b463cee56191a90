// The quantized-K/V half of the GPU interface (gpu_quantized.h) for GPU
// backends without the QuantizedAttention family (a backend with it builds
// its own in place of this file): nothing builds, and GPU calls over a
// quantized cache run as plain MLX ops.
#include <stdexcept>

#include "mlx_fused_attn/backend/gpu_quantized.h"

namespace mlx_fused_attn::gpu {

Support quantized_prepare(const QuantizedAttentionPlan&, mlx::core::Stream) {
  return Support::no(
      "[quantized_scaled_dot_product_attention] this build has no GPU "
      "kernel for a quantized K/V cache; GPU calls run as plain MLX ops");
}

void quantized_run(
    const QuantizedAttentionPlan&,
    const std::vector<mlx::core::array>&,
    std::vector<mlx::core::array>&,
    mlx::core::Stream) {
  throw std::logic_error(
      "[quantized_scaled_dot_product_attention] internal error: a GPU eval "
      "ran without a GPU plan");
}

} // namespace mlx_fused_attn::gpu
