// Whether the GPU backends may run the short-sequence kernel: yes, unless
// MLX_FUSED_ATTN_SHORT=0. Read at each call (as MLX_FUSED_ATTN_JIT is), so
// that one process can time or check the general kernel on the same shapes
// (benchmarks/gpu_bench.py --short, the tests). Set it for the whole of a
// call, its evaluation included: the support check and the launch both ask.
#pragma once

#include <cstdlib>

namespace mlx_fused_attn {

inline bool short_attention_enabled() {
  const char* env = std::getenv("MLX_FUSED_ATTN_SHORT");
  return env == nullptr || env[0] != '0';
}

} // namespace mlx_fused_attn
