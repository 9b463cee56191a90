// K and V blocks streamed by a producer warpgroup (FlashAttention-3's warp
// specialisation, sm_90a): one thread of the producer copies whole blocks
// by TMA (tma.h) into a ring of kStages stages, and the threads that do the
// math (the consumers) only wait for them. No consumer computes an address
// or waits on its own copies, and the producer gives its registers to the
// consumers.
//
// Per stage three mbarriers: full_k and full_v complete when the stage's K
// or V block has landed (the producer's arrival and the copies' bytes);
// empty completes when every consumer warp has arrived, done with the
// stage's block, after which the producer copies the next block into it.
//
// KVTmaRing is the consumers' schedule, with kv_pipeline.h's interface
// (start, acquire, acquire_v, k_block, v_block) and release(kb), which the
// step calls once a block's P V has returned (kOverlapSteps: the steps
// overlap, attention_step.h); produce is the producer's loop over the same
// blocks. The Source is attention.h's AttnKVSource: the stages'
// addresses, the barriers' (sync_smem, after V's stages) and the consumer
// threads (kThreads).
//
// With kResumes (CudaWgmmaTmaResumingTarget) the ring runs on across a
// threadgroup's work tiles (a persistent scheduler's): a tile's block kb
// is the ring's block ring_base + kb, ring_base the blocks of the
// threadgroup's earlier tiles, which the producer and the consumers count
// alike. Stages and barrier
// phases follow the ring's count, so the producer fills the next tile's
// first stages as soon as the consumers release the last tile's, under
// its last products and its store. The turns end each tile as they began
// (every arrival on a turn's barrier met by its wait), and before a later
// tile's Q overwrites the last one's every consumer has retired the last
// tile's products (await_consumers).
#pragma once

#include "mlx_fused_attn/tile/kv_pipeline.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/tma.h"
#include "mlx_fused_attn/tile/wgmma.h"

namespace fa {

template <int kStages>
struct KVTmaBarriers {
  mbarrier_t full_k[kStages];
  mbarrier_t full_v[kStages];
  mbarrier_t empty[kStages];
};

/// Threadgroup memory the ring keeps after the V stages for its barriers:
/// 1024 bytes, so that swizzled blocks after it stay aligned.
constexpr int kKVTmaSyncBytes = 1024;

/// The named barrier of the consumers alone (0 is the threadgroup's).
constexpr int kConsumerBarrier = 1;
/// The named barriers of the math warpgroups' turns (one each).
constexpr int kTurnBarrier = 2;

/// K's and V's tensor maps: the kernel's __grid_constant__ arguments, whose
/// addresses the copies take (tma.h).
struct KVTmaMaps {
  const TmaMap* k;
  const TmaMap* v;
};

/// One block of `Block`'s layout, rows from key0, into dst: a box a
/// 128-byte swizzle panel (the tensor map's box: a panel's columns by the
/// block's rows).
template <typename Block, typename T>
FA_FUNC void kv_tma_copy_block(
    T* dst,
    const TmaMap& map,
    mbarrier_t* full,
    int key0,
    int kv_head,
    int batch) {
  typedef typename Block::Layout Layout;
  static_assert(
      Layout::kTailCols == 0, "TMA copies whole 128-byte panels only");
  mbarrier_arrive_expect_bytes(
      full, Block::kElems * sizeof(T));
  FA_UNROLL
  for (int c = 0; c < Layout::kWidePanels; ++c) {
    tma_copy_4d(
        dst + Layout::panel_start(c * Layout::kWideCols), map, full,
        c * Layout::kWideCols, key0, kv_head, batch);
  }
}

template <
    typename Block,
    typename Source,
    int kStages,
    bool kResumes_ = false>
struct KVTmaRing : KVPipelineBase<Block, Source, kStages> {
  typedef KVPipelineBase<Block, Source, kStages> Base;
  typedef KVTmaBarriers<kStages> Barriers;
  FA_CONST int kSyncBytes = kKVTmaSyncBytes;
  FA_CONST bool kOverlapSteps = true;
  FA_CONST bool kResumes = kResumes_;
  static_assert(
      sizeof(Barriers) <= kKVTmaSyncBytes, "the barriers outgrow their space");

  /// The ring's blocks before this tile's block 0 (the mainloop sets it
  /// where the ring resumes; else the ring starts at each tile's block 0).
  int ring_base;

  FA_FUNC Barriers* barriers() const {
    return reinterpret_cast<Barriers*>(Base::src.sync_smem());
  }
  /// This tile's block kb's place in the ring.
  static FA_FUNC int ring_block(int ring_base, int kb) {
    if constexpr (kResumes) {
      return ring_base + kb;
    } else {
      return kb;
    }
  }
  FA_FUNC int ring_block(int kb) const {
    return ring_block(ring_base, kb);
  }
  /// Block kb's stage and the phase of its barriers' waits.
  FA_FUNC int stage(int kb) const {
    return ring_block(kb) % kStages;
  }
  FA_FUNC unsigned parity(int kb) const {
    return unsigned(ring_block(kb) / kStages) & 1u;
  }
  FA_FUNC const typename Source::elem_type* k_block(int kb) const {
    return Base::src.k_block(stage(kb));
  }
  FA_FUNC const typename Source::elem_type* v_block(int kb) const {
    return Base::src.v_block(stage(kb));
  }

  /// Before a later tile's Q load: every consumer has retired the products
  /// that read the last tile's Q (each warpgroup's last wait precedes it).
  FA_FUNC void await_consumers() const {
    named_barrier(kConsumerBarrier, Source::kThreads);
  }

  /// The math warpgroups take turns at issuing their products, in a ring
  /// (FlashAttention-3's ping-pong, for two): one's softmax runs while
  /// another's products have the tensor cores, rather than all waiting on
  /// them at once. One math warpgroup (64-query tiles, whose threadgroups
  /// share a multiprocessor instead) takes no turns: its own softmax
  /// already runs under its P V (attention_step.h's overlapped step).
  FA_CONST int kWarpgroups = Source::kThreads / 128;
  static_assert(
      kWarpgroups >= 1 && Source::kThreads % 128 == 0,
      "the math runs in whole warpgroups");
  FA_CONST bool kTurns = kWarpgroups > 1;
  /// A turn's barrier: the warpgroup taking it and the one handing it over.
  FA_CONST int kTurnThreads = 2 * 128;
  FA_FUNC int warpgroup() const {
    return Base::tid / 128;
  }

  /// This thread's copies of Q (cp.async, uncommitted) have landed, made
  /// visible to the products, and by the barrier everyone's; the first
  /// warpgroup has the first turn.
  FA_FUNC void start() const {
    Block::commit();
    Block::template wait<0>();
    named_barrier(kConsumerBarrier, Source::kThreads);
    if constexpr (kTurns) {
      if (warpgroup() == 0) {
        named_barrier_arrive(kTurnBarrier, kTurnThreads);
      }
    }
  }

  FA_FUNC void take_turn() const {
    if constexpr (kTurns) {
      named_barrier(kTurnBarrier + warpgroup(), kTurnThreads);
    }
  }

  /// Hands the turn to the next warpgroup; after the `last` products the
  /// last warpgroup's turn would have no taker, so it keeps it.
  FA_FUNC void pass_turn(bool last) const {
    if constexpr (kTurns) {
      if (!(last && warpgroup() == kWarpgroups - 1)) {
        named_barrier_arrive(
            kTurnBarrier + (warpgroup() + 1) % kWarpgroups, kTurnThreads);
      }
    }
  }

  FA_FUNC void acquire(int kb) const {
    mbarrier_wait(&barriers()->full_k[stage(kb)], parity(kb));
  }

  FA_FUNC void acquire_v(int kb) const {
    mbarrier_wait(&barriers()->full_v[stage(kb)], parity(kb));
  }

  /// This warp is done with block kb's stage (its P V has returned): one
  /// arrival a warp.
  FA_FUNC void release(int kb) const {
    __syncwarp();
    if (Base::tid % kSimdWidth == 0) {
      mbarrier_arrive(&barriers()->empty[stage(kb)]);
    }
  }

  /// The producer's one thread: block i of src.visits (visits.block(i)
  /// times Source::kBK keys on), i < n_blocks, the ring's block g
  /// (ring_block: ring_base + i where the ring resumes), into stage g %
  /// kStages once the consumers have released the block that stage held
  /// before.
  static FA_FUNC void produce(
      const KVTmaMaps& maps,
      const Source& src,
      int n_blocks,
      int ring_base,
      int kv_head,
      int batch) {
    typedef typename Source::VBlock VBlock;
    Barriers* bars = reinterpret_cast<Barriers*>(src.sync_smem());
    for (int kb = 0; kb < n_blocks; ++kb) {
      const int g = ring_block(ring_base, kb);
      const int s = g % kStages;
      if (g >= kStages) {
        mbarrier_wait(&bars->empty[s], unsigned(g / kStages - 1) & 1u);
      }
      const int key0 = src.visits.block(kb) * Source::kBK;
      kv_tma_copy_block<Block>(
          src.k_smem + s * Block::kElems, *maps.k, &bars->full_k[s], key0,
          kv_head, batch);
      kv_tma_copy_block<VBlock>(
          src.v_smem + s * VBlock::kElems, *maps.v, &bars->full_v[s], key0,
          kv_head, batch);
    }
  }
};

/// One thread's barrier set-up, before the threadgroup's barrier that
/// precedes both roles: the producer's one arrival on full_k and full_v, one
/// a consumer warp on empty.
template <int kStages>
FA_FUNC void kv_tma_init(KVTmaBarriers<kStages>* bars, int consumer_warps) {
  for (int s = 0; s < kStages; ++s) {
    mbarrier_init(&bars->full_k[s], 1);
    mbarrier_init(&bars->full_v[s], 1);
    mbarrier_init(&bars->empty[s], consumer_warps);
  }
  mbarrier_init_fence();
}

} // namespace fa
