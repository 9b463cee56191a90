// The GPU interface (gpu.h, gpu_na.h; the backward is no_gpu_backward.cpp)
// for builds against an MLX without a GPU backend: MLX itself cannot make a
// GPU stream there, so this only answers the checks (the caps say why no
// kernel runs, and the planners pass that on).
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/gpu_na.h"

#include <stdexcept>

namespace mlx_fused_attn::gpu {

namespace {

constexpr const char* kNoKernels =
    "this build of mlx_fused_attn has no GPU kernels (MLX has no Metal or "
    "CUDA backend here); GPU calls run as plain MLX ops";

} // namespace

DeviceCaps device_caps(mlx::core::Stream) {
  DeviceCaps caps;
  caps.refusal = kNoKernels;
  return caps;
}

Support prepare(const AttentionPlan&, mlx::core::Stream) {
  return Support::no(kNoKernels);
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

Support na_prepare(const NaPlan&, mlx::core::Stream) {
  return Support::no(kNoKernels);
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

std::string memory_kind(const mlx::core::array&) {
  return "host";
}

} // namespace mlx_fused_attn::gpu
