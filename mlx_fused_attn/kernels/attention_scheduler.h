// The tile scheduler of the attention body (attention.h): which work tiles
// (split, query block, head, batch) a threadgroup does, and in which order.
// One of the body's three policies, beside the mainloop and the epilogue
// (as FlashAttention-3's Hopper kernels take a TileScheduler type): the
// body asks it for a first tile and for the tile after each, and the math
// and a producer warpgroup that copies for it (kv_tma_ring.h) walk the same
// tiles, each asking alone. A scheduler that hands a threadgroup several
// tiles in turn (CUDA's persistent grid, kernels/cuda/
// persistent_scheduler.cuh) is another type with these two functions, and
// kOneTile false: the body then runs the K/V schedule on across the tiles
// (its kResumes, tile/kv_tma_ring.h).
#pragma once

#include "mlx_fused_attn/kernels/attention_args.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// A work tile, and whether there is one (the walk's end).
struct AttnWork {
  AttnPlace place;
  bool valid;
  int round; ///< the threadgroup's tiles before this one
};

/// The default scheduler: a threadgroup does one tile, the one its block
/// of the grid (query blocks * splits, H_q, B) names. Which block that is
/// the entry point says: Metal's own, or CUDA's heaviest first
/// (kernels/cuda/grid_order.cuh).
struct AttnStaticScheduler {
  FA_CONST bool kOneTile = true;
  AttnPlace place;

  FA_FUNC AttnWork first() const {
    const AttnWork work = {place, true, 0};
    return work;
  }
  FA_FUNC AttnWork next(AttnWork work) const {
    work.valid = false;
    return work;
  }
};

/// The static scheduler of grid block (x, head, batch): x is the query
/// block times n_splits plus the split (split_keys.h).
FA_FUNC AttnStaticScheduler
attention_static_scheduler(int x, int head, int batch, int n_splits) {
  const AttnStaticScheduler s = {
      {{x % n_splits, n_splits}, x / n_splits, head, batch}};
  return s;
}

} // namespace fa
