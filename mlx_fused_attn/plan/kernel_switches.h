// Switches that turn a kernel path off for the GPU backends, each on unless
// its variable is "0" (MLX_FUSED_ATTN_BWD_ONE_KERNEL, last, forces its path
// both ways): MLX_FUSED_ATTN_SHORT (the short-sequence kernel),
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
// until the call runs. MLX_FUSED_ATTN_PERSISTENT forces CUDA's persistent
// grid (plan/persistent_grid.h) either way: "1" wherever the tiles allow
// it, "0" never; unset, the planner chooses.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "mlx_fused_attn/plan/persistent_grid.h"

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

inline PersistentChoice persistent_choice() {
  const char* env = std::getenv("MLX_FUSED_ATTN_PERSISTENT");
  if (env == nullptr || env[0] == '\0') {
    return PersistentChoice::Planner;
  }
  const std::string value = env;
  if (value == "1") {
    return PersistentChoice::Always;
  }
  if (value == "0") {
    return PersistentChoice::Never;
  }
  throw std::invalid_argument(
      "[scaled_dot_product_attention] MLX_FUSED_ATTN_PERSISTENT must be "
      "\"1\" (a persistent grid wherever the tiles allow it), \"0\" (never) "
      "or unset (the planner's choice); got \"" + value + "\"");
}

/// MLX_FUSED_ATTN_BWD_ONE_KERNEL forces the CUDA backward's form both ways:
/// "1" one kernel (dK/dV accumulating dQ through atomics), "0" two (a dQ
/// kernel of its own); unset or anything else, the plan's choice `planned`.
inline bool backward_one_kernel(bool planned) {
  const char* env = std::getenv("MLX_FUSED_ATTN_BWD_ONE_KERNEL");
  if (env != nullptr && (env[0] == '0' || env[0] == '1') && env[1] == '\0') {
    return env[0] == '1';
  }
  return planned;
}

} // namespace mlx_fused_attn
