// The persistent tile scheduler of CUDA's attention kernel with a producer
// warpgroup (attention_scheduler.h's interface; FlashAttention-3's
// DynamicPersistentTileScheduler): a grid of a few blocks a multiprocessor,
// each walking work tiles of the static grid (query blocks * splits, H_q,
// B), which would launch one block each. The producer runs on into the
// next tile's K/V blocks while the math finishes a tile and stores it
// (tile/kv_tma_ring.h), which a static grid's next block on the
// multiprocessor starts cold.
//
// The walk is dynamic. The tiles are numbered in the static grid's order
// (grid_order.cuh's ordered_block: heaviest first under causal masks, in
// groups of rows that share L2); block b's first tile is tile b, and each
// later one is the next number of the order not yet taken, from a counter
// of the call's (one atomicAdd a tile, plus the grid's blocks, which took
// the first ones). A block that finishes early takes more tiles, as the
// hardware deals a static grid's blocks to the multiprocessors that free
// first, where a fixed share of the order (rounds of one tile a block)
// gave the busiest block 1.68x the mean work on a causal grid of 8 waves
// (docs/gpu_kernels.md).
//
// The counter is a word of the call's counters, zeroed as the split merge's
// are: the buffer is made and zeroed with the call's outputs
// (backend/cuda/split_partials.h), so two calls never share one. It ends
// at the tile count: every block takes one number past the last tile,
// which ends its walk.
//
// Who takes the number: the producer's copying thread, which must know the
// next tile before the math does (it copies that tile's first K/V blocks
// under this tile's last products). It publishes each tile to the math in
// shared memory (PersistentTileSlots): two slots, the block's tile `round`
// (its tiles before it) in slot (round - 1) % 2. The producer's
// arrival on the slot's full barrier releases its write; each math warp
// reads the slot after its wait on that barrier, and then arrives on the
// slot's empty barrier, on which the producer waits before writing the slot
// again two tiles later. So a slot is never rewritten before every math
// warp has read it, and the producer may run a tile ahead of the math's
// reads without waiting.
#pragma once

#include "mlx_fused_attn/kernels/attention_scheduler.h"
#include "mlx_fused_attn/kernels/cuda/grid_order.cuh"
#include "mlx_fused_attn/tile/tma.h"

namespace fa {

/// The walk's tile from counter value `ticket`, in a grid of `blocks`
/// blocks whose first tiles are 0 to blocks - 1. Host and device, so that
/// tests/test_persistent_grid_compile.py checks on the host that any
/// interleaving of the blocks' atomics takes every tile once.
__host__ __device__ inline int persistent_next_tile(
    unsigned ticket,
    int blocks) {
  return int(ticket) + blocks;
}

/// Which slot carries a block's tile `round` (from 1: tile 0 is the block's
/// own), and which use of the slot that is: the phase of its full barrier
/// that publishes the tile, and of its empty barrier that frees it. Host
/// and device, so that tests/test_persistent_grid_compile.py checks the
/// slots' barriers in a host model.
struct PersistentSlotUse {
  int slot;
  int use;
};
__host__ __device__ inline PersistentSlotUse persistent_slot_use(int round) {
  const PersistentSlotUse u = {(round - 1) & 1, (round - 1) >> 1};
  return u;
}

/// Where the producer publishes the math's next tiles: two slots, each with
/// its barriers (the producer's one arrival on full, one a math warp on
/// empty). In the ring's barrier space (kKVTmaSyncBytes), after the ring's
/// own barriers.
struct PersistentTileSlots {
  mbarrier_t full[2];
  mbarrier_t empty[2];
  int tile[2];
};

/// One thread's set-up of the slots, before the threadgroup's barrier that
/// precedes both roles (with kv_tma_init's fence).
__device__ __forceinline__ void persistent_slots_init(
    PersistentTileSlots* slots,
    int math_warps) {
  for (int s = 0; s < 2; ++s) {
    mbarrier_init(&slots->full[s], 1);
    mbarrier_init(&slots->empty[s], math_warps);
  }
}

/// The static grid's tiles, numbered in its order: what the producer's
/// scheduler and the math's share.
struct AttnPersistentTiles {
  static constexpr bool kOneTile = false;
  int gx; ///< the static grid's: query blocks times splits
  int gy; ///< H_q
  int gz; ///< B
  int n_splits;
  bool by_weight; ///< heaviest first (ordered_block)
  stride_t row_bytes; ///< what one (head, batch) row streams (grid_order.cuh)
  unsigned int* counter; ///< the walk's: zeroed at the call's start
  PersistentTileSlots* slots; ///< the threadgroup's

  /// Tile `t` of the walk, taken as the block's tile `round`: the static
  /// grid's block that the order numbers t, as the static scheduler places
  /// it (attention_static_scheduler); invalid past the last tile. Host and
  /// device, for tests/test_persistent_grid_compile.py.
  __host__ __device__ AttnWork work(int t, int round) const {
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
  /// The block's first tile, its own number: no atomic.
  __device__ AttnWork first() const {
    return work(blockIdx.x, 0);
  }
};

/// The producer's scheduler (its one copying thread): takes each next tile
/// from the counter and publishes it to the math.
struct AttnPersistentProducerScheduler : AttnPersistentTiles {
  __device__ AttnWork next(AttnWork w) const {
    const int t = persistent_next_tile(atomicAdd(counter, 1u), gridDim.x);
    // The slot is free once every math warp has read the tile it carried
    // last, two before.
    const PersistentSlotUse u = persistent_slot_use(w.round + 1);
    if (u.use > 0) {
      mbarrier_wait(&slots->empty[u.slot], unsigned(u.use - 1) & 1u);
    }
    slots->tile[u.slot] = t;
    mbarrier_arrive(&slots->full[u.slot]);
    return work(t, w.round + 1);
  }
};

/// The math's scheduler: each next tile as the producer published it.
struct AttnPersistentScheduler : AttnPersistentTiles {
  __device__ AttnWork next(AttnWork w) const {
    const PersistentSlotUse u = persistent_slot_use(w.round + 1);
    mbarrier_wait(&slots->full[u.slot], unsigned(u.use) & 1u);
    const int t = slots->tile[u.slot];
    // Every lane's read before the warp's arrival.
    __syncwarp();
    if (threadIdx.x % kSimdWidth == 0) {
      mbarrier_arrive(&slots->empty[u.slot]);
    }
    return work(t, w.round + 1);
  }
  /// The producer's view of the same walk.
  __device__ AttnPersistentProducerScheduler producer() const {
    const AttnPersistentProducerScheduler p = {
        static_cast<const AttnPersistentTiles&>(*this)};
    return p;
  }
};

} // namespace fa
