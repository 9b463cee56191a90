// How K/V blocks stream through threadgroup memory: the copy schedules of
// the attention kernels, as small policy types over a `Source` (the kernel's
// copies of one key block into one stage) and a `Block` (whose commit and
// wait close and await a thread's copies: a KVBlock or a loader).
//
//   KVRing      kStages > 1: a ring of stages, kStages - 1 blocks ahead of
//               the math (CUDA's cp.async; Metal runs it with plain loads).
//   KVStaggered one stage, asynchronous copies (CUDA's large-grid tiles): K
//               and V a buffer each, their copies half a block apart.
//   KVPlain     one stage, loads that return before the thread goes on
//               (Metal): K and V loaded together between two barriers.
//   KVRegisterStaged one stage, and the next block in each thread's
//               registers (a loader whose copies pass through them: the
//               dequantizing one): its loads in flight under the math.
//   KVResident  every block already in threadgroup memory.
//   KVTmaRing   (kv_tma_ring.h, sm_90a) a ring that a producer warpgroup
//               fills by TMA: the threads of the math only wait.
//
// A kernel's loop reads: start; for each key block kb: acquire(kb), then
// the step, which reads the blocks at k_block(kb) and v_block(kb) and calls
// acquire_v(kb) before its P V product. KVPipelineOf picks the schedule,
// kv_pipeline makes one.
//
// The Source supplies load_kv(kb, stage, tid) and k_block(stage) and
// v_block(stage); KVStaggered also load_k and load_v (the same, one side);
// KVRegisterStaged its halves, fetch_kv(kb, staged, tid) into a thread's
// Source::Staged and store_kv(stage, staged, tid) from it.
#pragma once

#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// What every schedule shares: a block's stage, and copies of several
/// blocks as one group that a kernel can wait for at once (a resident key
/// box, the neighborhood kernel's runs of tiles).
template <typename Block, typename Source, int kStages>
struct KVPipelineBase {
  /// Threadgroup memory the schedule keeps after the V stages (the TMA
  /// ring's barriers, kv_tma_ring.h).
  FA_CONST int kSyncBytes = 0;
  /// Whether the step releases each block itself (release(kb), once its
  /// P V has returned), so that steps may overlap (attention_step.h).
  FA_CONST bool kOverlapSteps = false;
  /// Whether the schedule runs on across a threadgroup's work tiles (a
  /// persistent scheduler's, attention_scheduler.h): the others start
  /// afresh in one tile a threadgroup.
  FA_CONST bool kResumes = false;


  Source src;
  int n_blocks; ///< key blocks the threadgroup visits
  int tid;

  static FA_FUNC int stage(int kb) {
    return kb % kStages;
  }
  /// Whether this thread's warp runs the key loop's acquires alone,
  /// without the steps (skip_steps): never, unless a schedule allows it.
  FA_FUNC bool skips_steps() const {
    return false;
  }
  FA_FUNC void skip_steps(bool) {}
  FA_FUNC const FA_THREADGROUP typename Source::elem_type* k_block(
      int kb) const {
    return src.k_block(stage(kb));
  }
  FA_FUNC const FA_THREADGROUP typename Source::elem_type* v_block(
      int kb) const {
    return src.v_block(stage(kb));
  }

  /// Starts the copies of blocks first .. last, each into its stage, as one
  /// group.
  FA_FUNC void load_blocks(int first, int last) const {
    for (int b = first; b <= last; ++b) {
      src.load_kv(b, stage(b), tid);
    }
    Block::commit();
  }

  /// Every block in its own stage (n_blocks <= kStages): all copies at
  /// once, behind one wait and one barrier, and none after.
  FA_FUNC void load_all() const {
    load_blocks(0, n_blocks - 1);
    wait_all();
  }

  /// Every copy this threadgroup started has landed and is visible to all
  /// its threads: this thread's wait, then a barrier for everyone's.
  FA_FUNC void wait_all() const {
    Block::template wait<0>();
    FA_BARRIER();
  }
};

/// K and V blocks share a ring of kStages: blocks 0 .. kStages - 2 start
/// before the loop, and every acquire commits one group (empty past the
/// last block), so that at the top of block kb, waiting for all but the
/// newest kStages - 2 groups means: block kb has landed.
template <typename Block, typename Source, int kStages>
struct KVRing : KVPipelineBase<Block, Source, kStages> {
  typedef KVPipelineBase<Block, Source, kStages> Base;

  FA_FUNC void start() const {
    for (int kb = 0; kb < kStages - 1; ++kb) {
      if (kb < Base::n_blocks) {
        Base::src.load_kv(kb, kb, Base::tid);
      }
      Block::commit();
    }
  }

  /// Block kb + kStages - 1 fills the stage of block kb - 1. This thread's
  /// copies of kb are waited for first, so that the one barrier both makes
  /// kb visible to all and tells that every warp is done with kb - 1.
  FA_FUNC void acquire(int kb) const {
    Block::template wait<kStages - 2>();
    FA_BARRIER();
    const int kb_next = kb + kStages - 1;
    if (kb_next < Base::n_blocks) {
      Base::src.load_kv(kb_next, Base::stage(kb_next), Base::tid);
    }
    Block::commit();
  }

  /// V lands with K.
  FA_FUNC void acquire_v(int) const {}
};

/// K and V a buffer each, their copies alternating half a block apart: V's
/// block kb under S_kb and the softmax, K's block kb + 1 under P V_kb; still
/// two barriers a block.
template <typename Block, typename Source>
struct KVStaggered : KVPipelineBase<Block, Source, 1> {
  typedef KVPipelineBase<Block, Source, 1> Base;

  FA_FUNC void start() const {
    Base::src.load_k(0, 0, Base::tid);
    Block::commit();
  }

  /// After this thread's copy of K's block kb has landed, the barrier makes
  /// it everyone's and tells that every warp is done with V's block kb - 1,
  /// whose buffer V's block kb then takes.
  FA_FUNC void acquire(int kb) const {
    Block::template wait<0>();
    FA_BARRIER();
    Base::src.load_v(kb, 0, Base::tid);
    Block::commit();
  }

  /// After this thread's copy of V's block kb has landed, the barrier makes
  /// it everyone's and tells that every warp is done with K's block kb,
  /// whose buffer K's block kb + 1 then takes.
  FA_FUNC void acquire_v(int kb) const {
    Block::template wait<0>();
    FA_BARRIER();
    if (kb + 1 < Base::n_blocks) {
      Base::src.load_k(kb + 1, 0, Base::tid);
    }
    Block::commit();
  }
};

/// One buffer each, loaded together so that their latencies overlap: a
/// barrier (every warp is done with block kb - 1), the loads, and a barrier
/// before anyone reads them.
template <typename Block, typename Source>
struct KVPlain : KVPipelineBase<Block, Source, 1> {
  typedef KVPipelineBase<Block, Source, 1> Base;

  FA_FUNC void start() const {}

  /// The wait, before the barrier that precedes block 0's products, covers
  /// an asynchronous copy of Q that joined block 0's group (attention.h's
  /// load_q; the Block's own loads have nothing in flight).
  FA_FUNC void acquire(int kb) const {
    Block::template wait<0>();
    FA_BARRIER();
    Base::src.load_kv(kb, 0, Base::tid);
    FA_BARRIER();
  }

  FA_FUNC void acquire_v(int) const {}
};

/// One buffer each, and the next block in each thread's registers: block
/// kb + 1's loads are issued, not waited for, before block kb's products,
/// and written into the buffers at the next acquire. The loads of a block
/// are in flight under the products of the one before, where KVPlain's
/// wait for them with the threadgroup idle; the cost is a block's share of
/// registers a thread. Still two barriers a block.
template <typename Block, typename Source>
struct KVRegisterStaged : KVPipelineBase<Block, Source, 1> {
  typedef KVPipelineBase<Block, Source, 1> Base;

  typename Source::Staged staged; ///< the block the next acquire stores
  bool idle; ///< skip_steps': the warp runs acquire alone

  /// A warp whose rows hold no query may skip the steps: every barrier is
  /// in acquire, and its targets' products are each warp's own
  /// (quantized_kv_target.h's padded blocks).
  FA_FUNC bool skips_steps() const {
    return idle;
  }
  FA_FUNC void skip_steps(bool no_rows) {
    idle = no_rows;
  }

  FA_FUNC void start() {
    if (Base::n_blocks > 0) {
      Base::src.fetch_kv(0, staged, Base::tid);
    }
  }

  /// After the barrier every warp is done with block kb - 1, whose buffers
  /// block kb (in registers since the last acquire) then takes; block
  /// kb + 1's loads start before the barrier that makes kb everyone's.
  FA_FUNC void acquire(int kb) {
    // As KVPlain's: an asynchronous copy of Q joined block 0's group.
    Block::template wait<0>();
    FA_BARRIER();
    Base::src.store_kv(0, staged, Base::tid);
    if (kb + 1 < Base::n_blocks) {
      Base::src.fetch_kv(kb + 1, staged, Base::tid);
    }
    FA_BARRIER();
  }

  FA_FUNC void acquire_v(int) const {}
};

/// Blocks the threadgroup loaded before the step (the short kernel's whole
/// sequences): nothing to wait for, one block each.
template <typename T>
struct KVResident {
  const FA_THREADGROUP T* k;
  const FA_THREADGROUP T* v;

  FA_FUNC const FA_THREADGROUP T* k_block(int) const {
    return k;
  }
  FA_FUNC const FA_THREADGROUP T* v_block(int) const {
    return v;
  }
  FA_FUNC void acquire_v(int) const {}
};

/// The schedule of kStages stages of `Block`s, whose copies are
/// asynchronous or not (Block::kAsync).
template <typename Block, typename Source, int kStages, bool kAsync>
struct KVPipelineChoice {
  typedef KVRing<Block, Source, kStages> type;
};
template <typename Block, typename Source>
struct KVPipelineChoice<Block, Source, 1, true> {
  typedef KVStaggered<Block, Source> type;
};
template <typename Block, typename Source>
struct KVPipelineChoice<Block, Source, 1, false> {
  typedef KVPlain<Block, Source> type;
};

template <typename Block, typename Source, int kStages>
using KVPipelineOf =
    typename KVPipelineChoice<Block, Source, kStages, Block::kAsync>::type;

/// A pipeline over `src`'s first n_blocks key blocks, for thread `tid` of
/// the threadgroup. (Member by member: Metal's C++14 has no aggregate
/// initialisation of a type with a base.)
template <typename Pipeline, typename Source>
FA_FUNC Pipeline kv_pipeline(Source src, int n_blocks, int tid) {
  Pipeline pipe;
  pipe.src = src;
  pipe.n_blocks = n_blocks;
  pipe.tid = tid;
  return pipe;
}

} // namespace fa
