// The fused backward of the GPU interface (backend/gpu.h) on CUDA: its plan
// and its launch. No CUDA backward kernel is built yet, so every plan says
// so and gradients run as plain MLX ops; the forward is then never asked for
// its LSE.
#include <stdexcept>

#include "mlx_fused_attn/backend/gpu.h"

namespace mlx_fused_attn::gpu {

void plan_backward(const AttentionCall&, AttentionPlan& plan) {
  plan.reason =
      "[scaled_dot_product_attention] CUDA: no fused backward kernel in this "
      "build; gradients run as plain MLX ops";
}

void run_backward(
    const AttentionPlan&,
    const std::vector<mlx::core::array>&,
    std::vector<mlx::core::array>&,
    mlx::core::Stream) {
  throw std::logic_error(
      "[scaled_dot_product_attention] internal error: CUDA backward run "
      "without a backward plan");
}

} // namespace mlx_fused_attn::gpu
