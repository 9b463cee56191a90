// Whether the GPU backends may run the short-sequence kernel: yes, unless
// MLX_FUSED_ATTN_SHORT=0. Read when each call is planned (as
// MLX_FUSED_ATTN_JIT is read at each call), so that one process can time or
// check the general kernel on the same shapes (benchmarks/gpu_bench.py
// --short, the tests); the plan keeps the answer until the call runs.
#pragma once

#include <cstdlib>

namespace mlx_fused_attn {

inline bool short_attention_enabled() {
  const char* env = std::getenv("MLX_FUSED_ATTN_SHORT");
  return env == nullptr || env[0] != '0';
}

} // namespace mlx_fused_attn
