// The GPU interface (gpu.h, gpu_na.h; the backward is no_gpu_backward.cpp)
// for builds against an MLX without a GPU backend: MLX itself cannot make a
// GPU stream there, so this only answers the checks.
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/gpu_na.h"

#include <stdexcept>

namespace mlx_fused_attn::gpu {

void plan(const AttentionCall&, AttentionPlan& plan) {
  plan.reason =
      "this build of mlx_fused_attn has no GPU kernels (MLX has no Metal or "
      "CUDA backend here); GPU calls run as plain MLX ops";
}

void run(
    const AttentionPlan&,
    const std::vector<mlx::core::array>&,
    std::vector<mlx::core::array>&,
    mlx::core::Stream) {
  throw std::logic_error(
      "[mlx_fused_attn] internal error: GPU eval in a build without GPU "
      "kernels");
}

void na_plan(const NaCall&, NaPlan& plan) {
  plan.reason =
      "this build of mlx_fused_attn has no GPU kernels (MLX has no Metal or "
      "CUDA backend here); GPU calls run as plain MLX ops with an explicit "
      "neighborhood mask";
}

void na_run(
    const NaPlan&,
    const std::vector<mlx::core::array>&,
    mlx::core::array&,
    mlx::core::Stream) {
  throw std::logic_error(
      "[neighborhood_attention] internal error: GPU eval in a build without "
      "GPU kernels");
}

BackendInfo backend_info() {
  return {"none", false, false, {}};
}

} // namespace mlx_fused_attn::gpu
