// The fused backward of the GPU interface (gpu.h) for GPU backends without
// a backward kernel (a backend with one builds its own in place of this
// file): no backward kernel builds and gradients run as plain MLX ops, so the
// forward is never asked for its LSE.
#include <stdexcept>

#include "mlx_fused_attn/backend/gpu.h"

namespace mlx_fused_attn::gpu {

Support prepare_backward(const AttentionPlan&, mlx::core::Stream) {
  return Support::no(
      "[scaled_dot_product_attention] this build has no fused GPU backward "
      "kernel; GPU gradients run as plain MLX ops");
}

void run_backward(
    const AttentionPlan&,
    const std::vector<mlx::core::array>&,
    std::vector<mlx::core::array>&,
    mlx::core::Stream) {
  throw std::logic_error(
      "[scaled_dot_product_attention] internal error: a GPU backward ran "
      "without a backward plan");
}

} // namespace mlx_fused_attn::gpu
