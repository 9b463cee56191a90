// The short-sequence kernel's launch on CUDA (short_attention_kernel.cuh,
// backend/cuda/attention_launch.h): the general kernel's arguments with the
// short kernel's features, one grid axis of sequences.
#include <variant>

#include "mlx_fused_attn/backend/cuda/attention_launch.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/families/short_attention/cuda/short_attention_kernel_key.h"
#include "mlx_fused_attn/families/short_attention/short_attention_launch_features.h"

namespace mlx_fused_attn::cuda {

namespace {

ShortAttentionKernelKey short_key(const AttentionPlan& plan) {
  return {
      plan.dtype, plan.params.D, std::get<fa::ShortAttnTiles>(plan.tiles)};
}

} // namespace

Support
prepare_short_attention(const AttentionPlan& plan, int device, int arch) {
  return kernel_ready(short_key(plan), device, arch);
}

void run_short_attention(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& outputs,
    const Launch& at) {
  const AttentionRun run = start_run(plan, inputs, outputs, false, at);
  add_attention_node(
      at, kernel_function(short_key(plan), at.device, at.arch), plan, run,
      outputs[0], short_features(plan.features));
}

} // namespace mlx_fused_attn::cuda
