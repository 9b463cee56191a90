// A small persistent pool of worker threads for the CPU kernels. Starting
// threads per call costs tens of microseconds each, which short attention
// calls would feel.
#pragma once

#include <functional>

namespace mlx_fused_attn::cpu {

/// Runs body(i) for every i in [0, n) on the pool and the calling thread,
/// returning when all are done. Work items are claimed one at a time, so
/// uneven items (causal blocks) balance themselves.
void parallel_for(int n, const std::function<void(int)>& body);

/// Threads used: MLX_FUSED_ATTN_NUM_THREADS if set, else the hardware's.
int num_threads();

} // namespace mlx_fused_attn::cpu
