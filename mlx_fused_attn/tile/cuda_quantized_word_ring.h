// CUDA's word ring: the K/V schedule of the quantized kernels that keeps
// several blocks' loads in flight. A ring of kWordStages shared-memory
// slots holds blocks' raw words, scales and biases, which cp.async copies
// kWordStages blocks ahead of the math; at its acquire a block is
// dequantized from its slot into the one K/V stage, as the register stage
// (kv_pipeline.h's KVRegisterStaged) dequantizes it from registers. The
// register stage holds one block ahead, a block's share of registers a
// thread; the ring holds kWordStages for a slot of shared memory each, the
// 4-bit words a quarter of the dequantized block's bytes. Decode against a
// long 4-bit cache is latency-bound on the register stage (ncu: no
// eligible warp 55% of the time, DRAM at 42% of its peak), and the bytes
// in flight a multiprocessor set its pace (Little's law).
//
// The slots' rows must be 16-byte runs of words (4 bits: D a multiple of
// 32) on 16-byte boundaries, and a block's scales and biases each one
// contiguous run on a 16-byte boundary: quantized_groups_in_runs and
// quantized_words_aligned, which the host checks (kernels without the ring
// run where they fail).
#pragma once

#include "mlx_fused_attn/tile/kv_pipeline.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/quantized_block_loader.h"

namespace fa {

/// One operand's block in a slot: its rows of words at a row stride of
/// kLd words, then its scales, then its biases, each kRows x (the row's
/// groups) values, with room for groups of 32. Where consecutive threads
/// read consecutive rows (the loader's kRowsFastest), a row is padded by
/// 16 bytes, so that a quarter warp's 16-byte reads of one chunk column
/// of eight rows meet in no bank; else consecutive threads read
/// consecutive 16 bytes already.
template <typename T, typename Block>
struct QuantizedWordSlot {
  FA_CONST int kRows = Block::kBlockRows;
  FA_CONST int kRowWords = Block::kBlockCols * Block::kCodeBits / 32;
  static_assert(kRowWords % 4 == 0, "a row is whole 16-byte copies");
  FA_CONST int kRowPieces = kRowWords / 4;
  FA_CONST int kLd = kRowWords + (Block::kRowsFastest ? 4 : 0);
  FA_CONST int kWordBytes = kRows * kLd * 4;
  FA_CONST int kGroupBytes = kRows * (Block::kBlockCols / 32) * int(sizeof(T));
  static_assert(kGroupBytes % 16 == 0, "scales and biases start aligned");
  FA_CONST int kBytes = kWordBytes + 2 * kGroupBytes;

  /// Thread tid's copies, of kThreads, of the block whose first row
  /// `src` is into the slot at `slot`; with kSafe only its first `rows`
  /// rows are read, the others zero-filled (zero codes, scales and
  /// biases: zeros once dequantized, as the loader's fetch gives them).
  template <bool kSafe, int kThreads>
  static FA_FUNC void copy(
      unsigned char* slot,
      QuantizedRows<T> src,
      int rows,
      int tid) {
    constexpr int kPieces = kRows * kRowPieces;
    unsigned int* words = reinterpret_cast<unsigned int*>(slot);
    FA_UNROLL
    for (int step = 0; step < (kPieces + kThreads - 1) / kThreads; ++step) {
      const int idx = step * kThreads + tid;
      if (kPieces % kThreads == 0 || idx < kPieces) {
        const int r = idx / kRowPieces;
        const int c = idx % kRowPieces * 4;
        const bool exists = !kSafe || r < rows;
        async_copy16(
            words + r * kLd + c,
            src.words + (exists ? r * src.word_ld + c : 0),
            exists ? 16 : 0);
      }
    }
    const int group_bytes =
        kRows * (Block::kBlockCols / src.group_size) * int(sizeof(T));
    const int read_bytes = kSafe
        ? rows * (Block::kBlockCols / src.group_size) * int(sizeof(T))
        : group_bytes;
    copy_run(slot + kWordBytes, src.scales, group_bytes, read_bytes, tid,
             kThreads);
    copy_run(slot + kWordBytes + kGroupBytes, src.biases, group_bytes,
             read_bytes, tid, kThreads);
  }

  /// `bytes` (whole 16-byte pieces) from `src` to `dst` over `threads`
  /// threads, reading only the first `read_bytes`.
  static FA_FUNC void copy_run(
      unsigned char* dst,
      const T* src,
      int bytes,
      int read_bytes,
      int tid,
      int threads) {
    const unsigned char* from = reinterpret_cast<const unsigned char*>(src);
    for (int at = tid * 16; at < bytes; at += threads * 16) {
      const int n = read_bytes - at;
      async_copy16(dst + at, from + (n > 0 ? at : 0), n >= 16 ? 16 : (n > 0 ? n : 0));
    }
  }

  /// The slot at `slot` as rows the loader reads (`like`'s group size).
  static FA_FUNC QuantizedRows<T> rows(
      const unsigned char* slot,
      const QuantizedRows<T>& like) {
    const stride_t groups = Block::kBlockCols / like.group_size;
    const QuantizedRows<T> r = {
        reinterpret_cast<const unsigned int*>(slot),
        reinterpret_cast<const T*>(slot + kWordBytes),
        reinterpret_cast<const T*>(slot + kWordBytes + kGroupBytes),
        kLd,
        groups,
        groups,
        1,
        1,
        like.group_size};
    return r;
  }
};

/// The schedule (kv_pipeline.h's interface) over a QuantKVSource
/// (quantized_attention.h), whose memory after the V stages (sync_smem,
/// kSyncBytes: Q follows) holds the ring. Blocks 0 .. kWordStages - 1 are
/// copied before the loop, a group each; at block kb, this thread waits
/// for its copies of kb (all but the newest kWordStages - 1 groups), and a
/// barrier makes everyone's visible and tells that every warp is done with
/// block kb - 1's stage, which block kb is then dequantized into; after a
/// second barrier (everyone has read kb's slot and written the stage), the
/// slot takes block kb + kWordStages. Every acquire commits a group (empty
/// past the last block), so the count holds; none is in flight after the
/// last block's wait.
template <typename Block, typename Source, int kWordStages>
struct KVWordRing : KVPipelineBase<Block, Source, 1> {
  typedef KVPipelineBase<Block, Source, 1> Base;
  typedef typename Source::elem_type T;
  typedef QuantizedWordSlot<T, typename Source::KBlock> KSlot;
  typedef QuantizedWordSlot<T, typename Source::VBlock> VSlot;
  FA_CONST int kSlotBytes = KSlot::kBytes + VSlot::kBytes;
  FA_CONST int kSyncBytes = kWordStages * kSlotBytes;
  static_assert(kWordStages >= 1, "a ring of at least one slot");

  bool idle; ///< skip_steps': the warp runs acquire alone

  /// As the register stage's: every barrier is in acquire.
  FA_FUNC bool skips_steps() const {
    return idle;
  }
  FA_FUNC void skip_steps(bool no_rows) {
    idle = no_rows;
  }

  FA_FUNC unsigned char* slot(int kb) const {
    return reinterpret_cast<unsigned char*>(Base::src.sync_smem()) +
        kb % kWordStages * kSlotBytes;
  }

  /// Block kb's words, scales and biases into its slot (none past the
  /// last block), then a commit.
  FA_FUNC void copy(int kb) const {
    if (kb < Base::n_blocks) {
      const Source& s = Base::src;
      const int block = s.visits.block(kb);
      const int key0 = block * KSlot::kRows;
      unsigned char* at = slot(kb);
      if (s.ragged(block)) {
        KSlot::template copy<true, Source::kThreads>(
            at, quantized_rows_from(s.k, key0), s.L_k - key0, Base::tid);
        VSlot::template copy<true, Source::kThreads>(
            at + KSlot::kBytes, quantized_rows_from(s.v, key0),
            s.L_k - key0, Base::tid);
      } else {
        KSlot::template copy<false, Source::kThreads>(
            at, quantized_rows_from(s.k, key0), KSlot::kRows, Base::tid);
        VSlot::template copy<false, Source::kThreads>(
            at + KSlot::kBytes, quantized_rows_from(s.v, key0),
            KSlot::kRows, Base::tid);
      }
    }
    async_copies_commit();
  }

  /// The copies of the first blocks join an asynchronous copy of Q
  /// (attention.h's load_q) in block 0's group.
  FA_FUNC void start() const {
    for (int kb = 0; kb < kWordStages; ++kb) {
      copy(kb);
    }
  }

  FA_FUNC void acquire(int kb) const {
    async_copies_wait<kWordStages - 1>();
    FA_BARRIER();
    const Source& s = Base::src;
    const unsigned char* at = slot(kb);
    typename Source::Staged staged;
    Source::KBlock::template fetch<false>(
        staged.k, KSlot::rows(at, s.k), KSlot::kRows, Base::tid);
    Source::VBlock::template fetch<false>(
        staged.v, VSlot::rows(at + KSlot::kBytes, s.v), VSlot::kRows,
        Base::tid);
    s.store_kv(0, staged, Base::tid);
    FA_BARRIER();
    copy(kb + kWordStages);
  }

  FA_FUNC void acquire_v(int) const {}
};

/// `QTarget` (a QuantizedKVTarget) with the word ring of kWordStages
/// slots as its K/V schedule.
template <typename QTarget, int kWordStages>
struct QuantizedWordRingTarget : QTarget {
  template <typename Block, typename Source, int kStages>
  using KVSchedule = KVWordRing<Block, Source, kWordStages>;
};

} // namespace fa
