// Whether the GPU backends may split keys across threadgroups (split_keys.h):
// yes, unless MLX_FUSED_ATTN_SPLIT_KEYS=0. Read when each call is planned,
// so that one process can check or time split against unsplit on the same
// shapes (tests/test_split_keys.py, benchmarks/gpu_bench.py).
#pragma once

#include <cstdlib>

namespace mlx_fused_attn {

inline bool split_keys_enabled() {
  const char* env = std::getenv("MLX_FUSED_ATTN_SPLIT_KEYS");
  return env == nullptr || env[0] != '0';
}

} // namespace mlx_fused_attn
