// The persistent tile scheduler of CUDA's attention kernel with a producer
// warpgroup (attention_scheduler.h's interface; FlashAttention-3's
// StaticPersistentTileScheduler): a grid of a few blocks a multiprocessor,
// each walking its share of the work tiles that the static grid (query
// blocks * splits, H_q, B) would launch one block each. The producer runs
// on into the next tile's K/V blocks while the math finishes a tile and
// stores it (tile/kv_tma_ring.h), which a static grid's next block on the
// multiprocessor starts cold.
//
// The tiles are taken in the static grid's order (grid_order.cuh's
// ordered_block: heaviest first under causal masks), in rounds of one tile
// a block. Rounds alternate direction: with heaviest-first order a block
// that took the heaviest tile of one round takes the lightest of the next,
// where a plain stride would give block 0 the heaviest of every round and
// no multiprocessor frees early for the hardware to rebalance, as it does
// for a static grid.
#pragma once

#include "mlx_fused_attn/kernels/attention_scheduler.h"
#include "mlx_fused_attn/kernels/cuda/grid_order.cuh"

namespace fa {

/// Tile `round * blocks + i` of the walk, where block `block` of `blocks`
/// takes i = block in even rounds and blocks - 1 - block in odd ones. Host
/// and device, so that tests/test_persistent_grid_compile.py checks on the
/// host that the blocks' walks cover every tile once.
__host__ __device__ inline int persistent_tile(
    int block,
    int blocks,
    int round) {
  return round * blocks + ((round & 1) ? blocks - 1 - block : block);
}

struct AttnPersistentScheduler {
  static constexpr bool kOneTile = false;
  int gx; ///< the static grid's: query blocks times splits
  int gy; ///< H_q
  int gz; ///< B
  int n_splits;
  bool by_weight; ///< heaviest first (ordered_block)
  stride_t row_bytes; ///< what one (head, batch) row streams (grid_order.cuh)

  /// Block `block` of `blocks`' tile of round `round`: the static grid's
  /// block that the walk's tile names, as the static scheduler places it
  /// (attention_static_scheduler). Host and device, for
  /// tests/test_persistent_grid_compile.py.
  __host__ __device__ AttnWork work(int block, int blocks, int round) const {
    const int t = persistent_tile(block, blocks, round);
    const bool valid = t < gx * gy * gz;
    // Past the walk's end, tile 0 (the order's arithmetic is the grid's).
    const int u = valid ? t : 0;
    const GridBlock b = ordered_block<Heaviest::Last>(
        u % gx, u / gx % gy, u / (gx * gy), gx, gy, gz, by_weight, row_bytes);
    const AttnWork w = {
        {{b.x % n_splits, n_splits}, b.x / n_splits, b.head, b.batch},
        valid,
        round};
    return w;
  }
  __device__ AttnWork first() const {
    return work(blockIdx.x, gridDim.x, 0);
  }
  __device__ AttnWork next(AttnWork w) const {
    return work(blockIdx.x, gridDim.x, w.round + 1);
  }
};

} // namespace fa
