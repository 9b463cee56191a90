// Whether the general kernel's grid is small enough for Hopper's small-grid
// producer tiles (attention_config.h, choose_small_grid_tiles): host
// arithmetic, free of MLX, shared by the planner (attention_planning.cpp)
// and tests/test_small_grid_compile.py. Issue 46's rule, unmeasured until a
// GPU run ranks the tiles (benchmarks/cuda_tile_sweep.cu's quick set), so
// the plan takes it only where MLX_FUSED_ATTN_SMALL_GRID_PRODUCER is "1"
// (kernel_switches.h).
#pragma once

#include <cstdint>

#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/params.h"

namespace mlx_fused_attn {

/// Keys up to which a tile is short enough for its fixed cost to weigh
/// (the prefill rows at L <= 1024 trail cuDNN by 16-36%).
constexpr int kSmallGridMaxKeys = 1024;
/// Waves of the grid's own tiles under which it is small at any length:
/// there a multiprocessor runs a tile or two, each paying its fixed cost.
constexpr int64_t kSmallGridMaxWaves = 2;
/// Queries below which the rule never applies: decode and short chunks,
/// whose query blocks are mostly empty rows, keep their tiles and splits.
constexpr int kSmallGridMinQueries = 128;

/// Whether a grid of `tiles` (the plan's choice without the rule) over the
/// call's B, H_q and L_q, on `sm_count` multiprocessors, is small: keys up
/// to kSmallGridMaxKeys, or fewer query blocks than kSmallGridMaxWaves
/// waves of them. A device of unknown size has none.
inline bool small_grid(
    const fa::AttnParams& p,
    const fa::AttnTiles& tiles,
    int sm_count) {
  if (sm_count <= 0 || p.L_q < kSmallGridMinQueries) {
    return false;
  }
  const int64_t q_blocks =
      int64_t((p.L_q + tiles.bq - 1) / tiles.bq) * p.H_q * p.B;
  return p.L_k <= kSmallGridMaxKeys ||
      q_blocks < kSmallGridMaxWaves * tiles.min_blocks * sm_count;
}

} // namespace mlx_fused_attn
