// Whether the general kernel's grid runs persistent (AttnTiles::persistent,
// kernels/cuda/persistent_scheduler.cuh), and how many blocks it then
// launches: host arithmetic, free of MLX, shared by the planner
// (attention_planning.cpp) and tests/test_persistent_grid_compile.py.
#pragma once

#include <algorithm>
#include <cstdint>

#include "mlx_fused_attn/kernels/attention_config.h"

namespace mlx_fused_attn {

/// Where the grid runs persistent: the planner's rule below (the candidate
/// default, issue 46), always where the tiles allow it, or never.
/// MLX_FUSED_ATTN_PERSISTENT (kernel_switches.h, opt-in: slower on a grid
/// the rule takes) picks Always on "1", Never otherwise.
enum class PersistentChoice { Planner, Always, Never };

/// A static grid of at most this many waves runs persistent: there each
/// multiprocessor's handful of tiles pays a cold start apiece (Q, the
/// first K/V blocks, the pipeline's fill and drain), which a persistent
/// block overlaps with the previous tile's end. Past it the tiles are long
/// or many enough for a static grid (B=4 H=32 L=8192 already runs at
/// cuDNN's speed with it). Measured always on (H200, 2026-12-06,
/// gpu_bench.py --persistent): 1.01-1.06x on grids of 2-8 waves, but 0.71x
/// on B=1 H=32 L=4096 causal (8 waves: the walk's load imbalance,
/// docs/gpu_kernels.md) and 0.92-0.95x at 62 waves.
constexpr int64_t kPersistentMaxWaves = 16;

/// Blocks of a persistent grid over `work_tiles` tiles of `tiles` on
/// `sm_count` multiprocessors, or 0 where the grid stays static: only the
/// producer kernel walks tiles (its K/V ring runs on across them), and only
/// past one wave, since within one every tile has a multiprocessor of its
/// own.
inline int64_t persistent_grid_blocks(
    const fa::AttnTiles& tiles,
    int64_t work_tiles,
    int sm_count,
    PersistentChoice choice) {
  const int64_t wave = int64_t(tiles.min_blocks) * sm_count;
  if (!tiles.producer || sm_count <= 0 || choice == PersistentChoice::Never) {
    return 0;
  }
  if (choice == PersistentChoice::Planner &&
      (work_tiles <= wave || work_tiles > kPersistentMaxWaves * wave)) {
    return 0;
  }
  return std::min(work_tiles, wave);
}

} // namespace mlx_fused_attn
