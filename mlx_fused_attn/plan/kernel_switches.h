// Switches that turn a kernel path off for the GPU backends, each on unless
// its variable is "0": MLX_FUSED_ATTN_SHORT (the short-sequence kernel),
// MLX_FUSED_ATTN_SPLIT_KEYS (split keys, split_keys.h),
// MLX_FUSED_ATTN_SPLIT_MERGE (split keys in one kernel on CUDA, the last
// split merging: kernels/cuda/split_merge.cuh; off, a combine kernel
// merges) and
// MLX_FUSED_ATTN_MASK_BLOCKS (an array mask's classes by block and the
// backward's block lists, kernels/mask_visits.h: the kernels then read the
// mask at every score of every block). Read when each call
// is planned (as MLX_FUSED_ATTN_JIT is read at each call), so that one
// process can time or check the other path on the same shapes
// (benchmarks/gpu_bench.py --short, the tests); the plan keeps the answer
// until the call runs.
#pragma once

#include <cstdlib>

namespace mlx_fused_attn {

inline bool kernel_switch_on(const char* variable) {
  const char* env = std::getenv(variable);
  return env == nullptr || env[0] != '0';
}

inline bool short_attention_enabled() {
  return kernel_switch_on("MLX_FUSED_ATTN_SHORT");
}

inline bool split_keys_enabled() {
  return kernel_switch_on("MLX_FUSED_ATTN_SPLIT_KEYS");
}

inline bool split_merge_enabled() {
  return kernel_switch_on("MLX_FUSED_ATTN_SPLIT_MERGE");
}

inline bool mask_blocks_enabled() {
  return kernel_switch_on("MLX_FUSED_ATTN_MASK_BLOCKS");
}

} // namespace mlx_fused_attn
