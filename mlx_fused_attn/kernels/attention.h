// The fused attention kernel body, written once over the tile ops:
//
//   O = softmax(scale * Q K^T + mask) V        per (batch, head, query block)
//
// Q and K have head dim D, V and O head dim D_v (equal, or DeepSeek's 192
// and 128). The products run over whole fragments: a head dim that is not
// (72 on CUDA, whose k16 steps make it 80) is padded with zero columns in
// Q and the K and V blocks, and only the real columns of O are stored.
//
// One threadgroup owns kBQ query rows of one head; each of its simdgroups
// (warps) owns kWarpRows of them. Q stays put for the whole run (in each
// warp's registers, or in threadgroup memory where the target's products
// read it from there). K and V stream through threadgroup memory kBK keys
// at a time, on the schedule the target picks for the tiles
// (Target::KVSchedule, tile/kv_pipeline.h): on
// CUDA a ring of kStages blocks, the copies of the next blocks under the
// math of this one, or (CUDA's large-grid tiles) a buffer each, their copies
// staggered so that each runs under the other's products, or (Hopper's D =
// 128 past one wave) a ring that a producer warpgroup fills by TMA while
// the math's steps overlap (attention_step.h's AttnKeyLoop); on Metal, whose
// loads return before a thread goes on, one buffer each, loaded together.
// Each block is one attention_step (attention_step.h): the online softmax
// (running max and sum in fp32, exp2 domain); the output is written once at
// the end.
//
// `Target` supplies the fragment types by role (FragA<T>, FragC), the K/V
// block type (KVBlock: its threadgroup-memory layout, its loader and the two
// products that read it: padded_block.h, swizzled_block.h) and where Q is
// kept (QOperand: q_in_registers.h, q_in_shared.h); the entry point
// of each backend picks it and fills the features (function constants or
// template bools). The mask arrives as bytes: it holds bool or T, as the
// features say; with it come its classes by block (mask_visits.h), which
// skip the blocks it hides, spare the reads of the blocks it shows whole
// and read two-valued blocks as bits.
//
// With split keys (split_keys.h) the threadgroup visits only its split of
// the query block's key blocks (of its visits, under an array mask) and
// writes a partial output and its softmax statistics in place of the output.
// Without, it may also write each row's log-sum-exp for the backward
// (has_lse, backward_params.h).
//
// The body is three policies, which the entry point picks as it picks the
// target (attention_body, at the end): the mainloop (AttnMainloop: the
// visits, the masks, Q's load and the key loop; and a producer
// warpgroup's copies), the epilogue (attention_epilogue.h: the stores) and
// the tile scheduler (attention_scheduler.h: which work tiles a
// threadgroup does).
#pragma once

#include "mlx_fused_attn/kernels/attention_args.h"
#include "mlx_fused_attn/kernels/attention_epilogue.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/attention_masks.h"
#include "mlx_fused_attn/kernels/attention_step.h"
#include "mlx_fused_attn/kernels/attention_scheduler.h"
#include "mlx_fused_attn/kernels/key_slices.h"
#include "mlx_fused_attn/kernels/mask_visits.h"
#include "mlx_fused_attn/kernels/split_keys.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/kv_pipeline.h"
#include "mlx_fused_attn/tile/platform.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

/// Compile-time shape of one kernel instance. The tile sizes come from the
/// instantiation list, which static_asserts them against
/// choose_attention_tiles.
template <
    typename T,
    int kHeadDim_,
    int kBQ_,
    int kBK_,
    int kWarps_,
    int kStages_ = 1,
    int kHeadDimV_ = kHeadDim_,
    int kKeySlices_ = 1>
struct AttnShape {
  typedef T elem_type;
  FA_CONST int kHeadDim = kHeadDim_; ///< of q and k
  FA_CONST int kHeadDimV = kHeadDimV_; ///< of v and the output
  FA_CONST int kBQ = kBQ_;
  FA_CONST int kBK = kBK_;
  FA_CONST int kWarps = kWarps_;
  FA_CONST int kStages = kStages_;
  FA_CONST int kThreads = kWarps * kSimdWidth;
  /// Warps that share rows and split each key block's keys between them
  /// (AttnTiles::key_slices): kWarps of them, or 1.
  FA_CONST int kKeySlices = kKeySlices_;
  FA_CONST int kWarpRows = kBQ * kKeySlices / kWarps;
  /// From one warp's first row to the next's: the same rows for key slices.
  FA_CONST int kWarpRowStep = kKeySlices > 1 ? 0 : kWarpRows;
  /// The keys of a block that one warp's step reads.
  FA_CONST int kStepKeys = kBK / kKeySlices;
  /// 16 bytes of padding per row spread the rows of a K or V block over the
  /// threadgroup memory banks (as in MLX's steel kernels).
  FA_CONST int kSmemLd = kHeadDim + 16 / sizeof(T);
  /// One K (or V) block; k_smem and v_smem each hold kStages of them.
  FA_CONST int kStageElems = kBK * kSmemLd;
  FA_CONST int kSmemElems = kStages * kStageElems;

  static_assert(
      kBQ * kKeySlices % kWarps == 0,
      "query rows must split evenly over warps");
  static_assert(
      kKeySlices == 1 || kKeySlices == kWarps,
      "the warps split the keys all together, or not at all");
};

/// A head dim as the products of `Target` see it: whole fragments, the
/// columns past it zero (attention_padded_head_dim on the host).
template <typename Target, int kHeadDim>
struct AttnPaddedHeadDim {
  FA_CONST int value = round_up(kHeadDim, Target::FragC::kCols);
};

/// The type of the K blocks (head dim D) or of the V blocks (head dim D_v)
/// of a kernel instance on `Target`.
template <typename Target, typename Shape, int kHeadDim>
using AttnBlockOf = typename Target::template KVBlock<
    typename Shape::elem_type,
    Shape::kBK,
    AttnPaddedHeadDim<Target, kHeadDim>::value,
    kHeadDim,
    Shape::kThreads>;
template <typename Target, typename Shape>
using AttnKBlock = AttnBlockOf<Target, Shape, Shape::kHeadDim>;
template <typename Target, typename Shape>
using AttnVBlock = AttnBlockOf<Target, Shape, Shape::kHeadDimV>;

/// Where a kernel instance keeps Q on `Target`.
template <typename Target, typename Shape>
using AttnQOperand = typename Target::template QOperand<
    typename Shape::elem_type,
    Shape::kBQ,
    AttnPaddedHeadDim<Target, Shape::kHeadDim>::value,
    Shape::kHeadDim,
    Shape::kWarpRows,
    Shape::kThreads>;

/// The rows of an array that streams through a kernel's stages, as their
/// loads see them: `rows` of them, n_full whole blocks; unless `aligned`,
/// block n_full is the ragged last one; stride32: the feature
/// (attention_features.h).
struct AttnBlockRows {
  int rows;
  int n_full;
  bool aligned;
  bool stride32;
};

/// Block kb of `r`'s rows (row stride `stride`, rows from kb * kBK) into
/// `smem`: the ragged last block zero-fills its missing rows. Where the
/// target's loader has a 32-bit copy (kStride32Loads) and r.stride32 is on,
/// the row stride and the offsets from row 0 are 32 bits and the loader
/// steps its pointers.
template <typename Block, int kBK, bool kStride32Loads, typename T>
FA_FUNC void attention_load_block(
    FA_THREADGROUP T* smem,
    const FA_DEVICE T* src,
    stride_t stride,
    AttnBlockRows r,
    int kb,
    int tid) {
  const int key0 = kb * kBK;
  const bool partial = !r.aligned && kb == r.n_full;
  if constexpr (kStride32Loads) {
    if (r.stride32) {
      const int ld = int(stride);
      src += key0 * ld;
      if (partial) {
        Block::load_safe_stride32(smem, src, ld, r.rows - key0, tid);
      } else {
        Block::load_stride32(smem, src, ld, tid);
      }
      return;
    }
  }
  src += key0 * stride;
  if (partial) {
    Block::load_safe(smem, src, stride, r.rows - key0, tid);
  } else {
    Block::load(smem, src, stride, tid);
  }
}

/// Where the K/V schedule's own threadgroup memory starts (the TMA ring's
/// barriers, kv_tma_ring.h): after V's stages, which start at v_smem.
template <typename Target, typename Shape>
FA_FUNC FA_THREADGROUP typename Shape::elem_type* attention_sync_smem(
    FA_THREADGROUP typename Shape::elem_type* v_smem) {
  return v_smem + Shape::kStages * AttnVBlock<Target, Shape>::kElems;
}

/// The copies of one (batch, head)'s key blocks into K's and V's stages,
/// for the pipeline (kv_pipeline.h's Source): its block i is key block
/// visits.block(i) (a split's first visit is its 0), keys from that block
/// times kBK; a ragged last block zero-fills its missing keys.
template <typename Target, typename Shape>
struct AttnKVSource {
  typedef typename Shape::elem_type elem_type;
  typedef AttnKBlock<Target, Shape> KBlock;
  typedef AttnVBlock<Target, Shape> VBlock;
  /// The threads that read the blocks.
  FA_CONST int kThreads = Shape::kThreads;
  /// The keys of a block.
  FA_CONST int kBK = Shape::kBK;

  /// Lengths and strides are read from here where used: copies would hold
  /// registers across the key loop.
  const FA_CONSTANT AttnParams* p;
  const FA_DEVICE elem_type* k; ///< this (batch, head)'s key 0
  const FA_DEVICE elem_type* v;
  AttnVisits visits; ///< which key block each of the pipeline's blocks is
  int n_full_kblocks;
  bool align_k;
  bool stride32; ///< the feature (attention_load_block)
  FA_THREADGROUP elem_type* k_smem;
  FA_THREADGROUP elem_type* v_smem;

  FA_FUNC const FA_THREADGROUP elem_type* k_block(int stage) const {
    return k_smem + stage * KBlock::kElems;
  }
  FA_FUNC const FA_THREADGROUP elem_type* v_block(int stage) const {
    return v_smem + stage * VBlock::kElems;
  }
  FA_FUNC FA_THREADGROUP elem_type* sync_smem() const {
    return attention_sync_smem<Target, Shape>(v_smem);
  }
  FA_FUNC AttnBlockRows key_rows() const {
    const AttnBlockRows r = {p->L_k, n_full_kblocks, align_k, stride32};
    return r;
  }
  FA_FUNC void load_k(int kb, int stage, int tid) const {
    attention_load_block<KBlock, Shape::kBK, Target::kStride32Loads>(
        k_smem + stage * KBlock::kElems, k, p->k_strides[2], key_rows(),
        visits.block(kb), tid);
  }
  FA_FUNC void load_v(int kb, int stage, int tid) const {
    attention_load_block<VBlock, Shape::kBK, Target::kStride32Loads>(
        v_smem + stage * VBlock::kElems, v, p->v_strides[2], key_rows(),
        visits.block(kb), tid);
  }
  FA_FUNC void load_kv(int kb, int stage, int tid) const {
    load_k(kb, stage, tid);
    load_v(kb, stage, tid);
  }
};

/// The source of (batch, kv_head)'s key blocks in the order of `visits`.
template <typename Target, typename Shape>
FA_FUNC AttnKVSource<Target, Shape> attention_kv_source(
    const FA_CONSTANT AttnParams& p,
    const FA_DEVICE typename Shape::elem_type* k,
    const FA_DEVICE typename Shape::elem_type* v,
    AttnSmem<typename Shape::elem_type> smem,
    AttnFeatures f,
    int batch,
    int kv_head,
    AttnVisits visits) {
  const AttnKVSource<Target, Shape> src = {
      &p,
      k + batch * p.k_strides[0] + kv_head * p.k_strides[1],
      v + batch * p.v_strides[0] + kv_head * p.v_strides[1],
      visits, p.L_k / Shape::kBK, f.align_k, f.stride32, smem.k, smem.v};
  return src;
}

/// The float kernels' K and V, copied into the stages as they are: the
/// default K/V policy of the mainloop (AttnMainloop's `KV`), which makes
/// the pipeline's Source for a (batch, kv_head) and its visits. Another
/// family's policy reads another layout into the same blocks
/// (quantized_attention.h).
template <typename Target, typename Shape>
struct AttnPlainKV {
  typedef typename Shape::elem_type elem_type;
  typedef AttnKVSource<Target, Shape> Source;
  const FA_DEVICE elem_type* k;
  const FA_DEVICE elem_type* v;
  AttnSmem<elem_type> smem;

  FA_FUNC Source source(
      const FA_CONSTANT AttnParams& p,
      AttnFeatures f,
      int batch,
      int kv_head,
      AttnVisits visits) const {
    return attention_kv_source<Target, Shape>(
        p, k, v, smem, f, batch, kv_head, visits);
  }
};

/// The key blocks a query block visits, 0 .. end - 1, of which blocks
/// causal onwards need the causal mask. Causal: query i sees keys j <= i +
/// causal_offset, so blocks right of the block's last diagonal are skipped
/// and blocks left of its first diagonal need no mask. Rows with i +
/// causal_offset < 0 see no key at all; MLX gives them a uniform softmax
/// over every key, so a query block holding such a row visits (and masks)
/// every key block.
struct AttnKeyBlocks {
  int end;
  int causal;
};

template <int kBQ, int kBK>
FA_FUNC AttnKeyBlocks
attention_key_blocks(const FA_CONSTANT AttnParams& p, bool causal, int q_block) {
  const int n_kblocks = (p.L_k + kBK - 1) / kBK;
  AttnKeyBlocks blocks = {n_kblocks, n_kblocks};
  if (!causal) {
    return blocks;
  }
  const int first_row = q_block * kBQ;
  const int last_row = (first_row + kBQ < p.L_q ? first_row + kBQ : p.L_q) - 1;
  const int first_limit = first_row + p.causal_offset;
  const int last_limit = last_row + p.causal_offset;
  if (first_limit < 0) {
    blocks.causal = 0;
    return blocks;
  }
  const int kb_diag = last_limit / kBK + 1;
  blocks.end = kb_diag < n_kblocks ? kb_diag : n_kblocks;
  blocks.causal = (first_limit + 1) / kBK;
  return blocks;
}

/// The key blocks one threadgroup visits, in order: a split's share of the
/// query block's run 0 .. end - 1, or of its visits under an array mask
/// (causal and an array mask never come together; splits share the visits).
/// The math and a producer that copies for it (kv_tma_ring.h) follow the
/// same.
struct AttnVisitRange {
  AttnVisits visits; ///< visit i is the pipeline's block i
  int n_blocks;
  AttnKeyBlocks blocks;
  int off_row; ///< where the mask's off value is (mask_visits.h)
  int off_col;
};

template <int kBQ, int kBK>
FA_FUNC AttnVisitRange attention_visit_range(
    const FA_CONSTANT AttnParams& p,
    const FA_DEVICE unsigned int* mask_blocks,
    AttnFeatures f,
    AttnPlace at) {
  AttnVisitRange r;
  r.blocks = attention_key_blocks<kBQ, kBK>(p, f.causal, at.q_block);
  int n_visits = r.blocks.end;
  r.off_row = 0;
  r.off_col = 0;
  r.visits = attention_visits<kBQ>(
      p, f.mask_blocks ? mask_blocks : 0, at.batch, at.head, at.q_block,
      n_visits, r.off_row, r.off_col);
  const AttnSplitBlocks mine =
      split_key_blocks(n_visits, at.split.index, at.split.count);
  r.visits.first = mine.first;
  r.n_blocks = mine.end - mine.first;
  return r;
}

/// The masks of a warp's rows (from q_row0) over the visits of `range`.
template <typename T, int kBK, bool kValuesStart>
FA_FUNC AttnBlockMasks<T, kBK, kValuesStart> attention_masks_of(
    const FA_CONSTANT AttnParams& p,
    const FA_DEVICE unsigned char* mask,
    AttnFeatures f,
    AttnVisitRange range,
    int batch,
    int head,
    int q_row0) {
  AttnBlockMasks<T, kBK, kValuesStart> masks =
      attention_block_masks<T, kBK, kValuesStart>(
          p, mask, f.causal, f.has_mask, f.bool_mask, batch, head, q_row0);
  masks.align_k = f.align_k;
  masks.kb_causal = range.blocks.causal;
  masks.visits = range.visits;
  if (f.has_mask && !f.bool_mask && range.visits.list) {
    // One element of the mask, read once: what two-valued blocks add.
    const AddMaskOp<T> off = {
        reinterpret_cast<const FA_DEVICE T*>(mask) + masks.mask_offset,
        p.mask_strides[2], p.mask_strides[3], p.L_q, p.L_k};
    masks.set_off_value(off.apply(0.0f, range.off_row, range.off_col));
  }
  return masks;
}

/// A warp's share of work tile `at` (attention_args.h).
template <typename Shape>
FA_FUNC AttnWarpRows attention_warp_rows(
    const FA_CONSTANT AttnParams& p,
    AttnFeatures f,
    AttnPlace at,
    int warp) {
  const AttnWarpRows w = {
      warp, at.q_block * Shape::kBQ + warp * Shape::kWarpRowStep,
      !f.align_q && at.q_block == p.L_q / Shape::kBQ};
  return w;
}

/// The rows key slice `w` stores (key_slices.h): slice 0 its merged rows,
/// the others none.
template <typename Shape>
FA_FUNC AttnWarpRows
attention_slice_stored_rows(const FA_CONSTANT AttnParams& p, AttnWarpRows w) {
  if (w.warp % Shape::kKeySlices != 0) {
    w.q_row0 = p.L_q;
    w.q_ragged = true;
  }
  return w;
}

/// The mainloop of the attention body, its first policy (as
/// FlashAttention-3's Hopper kernels take a CollectiveMainloop type): a
/// work tile's key blocks through K's and V's stages into a warp's step.
/// `mma` is the math's part: the visits, the masks, Q's load (the
/// prologue) and the key loop; `load` the part of a producer warpgroup
/// where the target's schedule has one (kv_tma_ring.h), copying the same
/// visits for it. K and V are read only through the K/V policy `kv`
/// (AttnPlainKV's interface), which also holds the stages: the float
/// kernels' copies them as they are, another family's reads another
/// layout into the same blocks (quantized_attention.h).
template <
    typename Target,
    typename Shape_,
    typename KV = AttnPlainKV<Target, Shape_>>
struct AttnMainloop {
  typedef Shape_ Shape;
  typedef typename Shape::elem_type T;
  typedef typename KV::Source Source;
  typedef typename Source::KBlock KBlock;
  typedef typename Source::VBlock VBlock;
  FA_CONST int kBQ = Shape::kBQ;
  FA_CONST int kBK = Shape::kBK;
  /// The columns of V and O in the products.
  FA_CONST int kVCols = AttnPaddedHeadDim<Target, Shape::kHeadDimV>::value;
  // The columns of Q and K in the products.
  static_assert(
      AttnPaddedHeadDim<Target, Shape::kHeadDim>::value %
              Target::template FragA<T>::kCols ==
          0,
      "the padded head dim of Q and K must be whole fragments");
  static_assert(
      kBK % kMaskWordBits == 0 || kMaskWordBits % kBK == 0,
      "a key block must be whole shown-bits words, or lie in one");
  // The copies of K and V blocks commit and wait as one group: the groups
  // are the thread's (KBlock::commit and VBlock::commit are the same).
  typedef typename Target::template KVSchedule<KBlock, Source, Shape::kStages>
      Pipeline;
  typedef AttnStep<Target, T, Shape::kWarpRows, Shape::kStepKeys, kVCols> Step;
  /// The masks of a warp's step: blocks of its keys (key_slices.h), in
  /// which the causal cut starts kKeySlices times later.
  template <bool kValuesStart>
  static FA_FUNC AttnBlockMasks<T, Shape::kStepKeys, kValuesStart> masks_of(
      const FA_CONSTANT AttnParams& p,
      const FA_DEVICE unsigned char* mask,
      AttnFeatures f,
      AttnVisitRange range,
      int batch,
      int head,
      int q_row0) {
    if constexpr (Shape::kKeySlices > 1) {
      AttnBlockMasks<T, Shape::kStepKeys, kValuesStart> masks =
          attention_masks_of<T, Shape::kStepKeys, kValuesStart>(
              p, mask, f, range, batch, head, q_row0);
      masks.kb_causal *= Shape::kKeySlices;
      return masks;
    } else {
      return attention_masks_of<T, kBK, kValuesStart>(
          p, mask, f, range, batch, head, q_row0);
    }
  }

  KV kv;

  /// The prologue: a warp's rows of Q into its operand (`q_smem`: where
  /// the target keeps Q in threadgroup memory). First, and with no commit
  /// of its own: a Q copied into threadgroup memory (asynchronously) joins
  /// the copy group of key block 0, so the wait and barrier before block
  /// 0's products cover it (the TMA ring's start waits for it alone); that
  /// memory follows the V stages and the schedule's own. Register loads do
  /// not block until the first product, so their latency overlaps the
  /// first K/V copies either way.
  template <typename QOperand>
  static FA_FUNC void load_q(
      FA_THREAD QOperand& q_op,
      const FA_DEVICE T* q,
      const FA_CONSTANT AttnParams& p,
      AttnPlace at,
      AttnWarpRows w,
      FA_THREADGROUP T* q_smem,
      lane_t lane) {
    const int row0 = at.q_block * kBQ;
    q_load(
        q_op,
        q + at.batch * p.q_strides[0] + at.head * p.q_strides[1] +
            row0 * p.q_strides[2],
        p.q_strides[2], p.L_q - row0, w.q_ragged, q_smem, w.warp, lane);
  }

  /// The math's part: work tile `at`'s key blocks into the warp's step
  /// `st` (begun here, from the sink where split 0 counts it). Returns the
  /// blocks it visited; `ring_base`, those of the threadgroup's earlier
  /// tiles, where the schedule runs on across tiles (Pipeline::kResumes).
  FA_FUNC int mma(
      FA_THREAD Step& st,
      AttnArrays<T> a,
      const FA_CONSTANT AttnParams& p,
      AttnFeatures f,
      AttnPlace at,
      AttnWarpRows w,
      int ring_base,
      lane_t lane) const {
    const int head = at.head;
    const int batch = at.batch;
    const int kv_head = head / p.gqa_factor;
    const AttnVisitRange range =
        attention_visit_range<kBQ, kBK>(p, a.mask_blocks, f, at);
    const AttnVisits visits = range.visits;
    const int n_blocks = range.n_blocks;

    Pipeline pipe = kv_pipeline<Pipeline>(
        kv.source(p, f, batch, kv_head, visits), n_blocks,
        w.warp * kSimdWidth + lane);
    if constexpr (Pipeline::kResumes) {
      pipe.ring_base = ring_base;
    }
    const AttnBlockMasks<T, Shape::kStepKeys> masks =
        masks_of<true>(p, a.mask, f, range, batch, head, w.q_row0);
    const int slice = Shape::kKeySlices > 1 ? w.warp % Shape::kKeySlices : 0;

    // The sink is one logit of the row: split 0 (its slice 0) counts it.
    const bool sink = f.has_sinks && at.split.index == 0 && slice == 0;
    attention_step_begin(st, sink, sink ? a.sinks[head] : T(0));

    // A split past a causal query block's keys visits none, and copies
    // nothing: a copy never waited for could land after the threadgroup
    // ends.
    if (n_blocks > 0) {
      // After a tile of this threadgroup's, whose last products may still
      // read the Q that this tile's copy overwrites.
      if constexpr (Pipeline::kResumes) {
        if (ring_base > 0) {
          pipe.await_consumers();
        }
      }
      AttnQOperand<Target, Shape> q_op;
      // Key slices load warp 0's rows, which they share.
      AttnWarpRows q_rows = w;
      if constexpr (Shape::kKeySlices > 1) {
        q_rows.warp = 0;
      }
      load_q(
          q_op, a.q, p, at, q_rows,
          pipe.src.sync_smem() + Pipeline::kSyncBytes / int(sizeof(T)), lane);

      // --------------------------------------------------- the key blocks
      // Numbered from the split's first visit: the pipeline's and the
      // masks' 0.
      pipe.start();
      // A warp none of whose rows is a query (decode's packed rows fill a
      // fraction of the block) skips the steps where the schedule allows.
      pipe.skip_steps(w.q_row0 >= p.L_q);
      typedef AttnKeyLoop<Pipeline::kOverlapSteps> KeyLoop;
      if constexpr (Shape::kKeySlices > 1) {
        AttnSlicedKeyLoop<T, Shape::kKeySlices, Shape::kStepKeys>::template run<
            KBlock, VBlock>(
            st, q_op, masks, pipe, visits, n_blocks, slice, lane);
      } else if (!Target::kZeroStartLoop) {
        KeyLoop::template run<KBlock, VBlock>(
            st, q_op, masks, pipe, visits, n_blocks, lane);
      } else {
        // One loop a threadgroup: with no visit that starts S from mask
        // values, the loop whose S starts at zero, which the products fold
        // in. Masks built here, not above: held across Q's load, their
        // registers made both loops 5-10% slower (H200).
        const AttnBlockMasks<T, kBK> values_start =
            attention_masks_of<T, kBK, true>(
                p, a.mask, f, range, batch, head, w.q_row0);
        if (values_start.starts_with_values(n_blocks, lane)) {
          KeyLoop::template run<KBlock, VBlock>(
              st, q_op, values_start, pipe, visits, n_blocks, lane);
        } else {
          const AttnBlockMasks<T, kBK, false> zero_start =
              attention_masks_of<T, kBK, false>(
                  p, a.mask, f, range, batch, head, w.q_row0);
          KeyLoop::template run<KBlock, VBlock>(
              st, q_op, zero_start, pipe, visits, n_blocks, lane);
        }
      }
    }
    if constexpr (Shape::kKeySlices > 1) {
      merge_key_slices(st, pipe, slice, lane);
    }
    return n_blocks;
  }

  /// Slice 0's step becomes the merge of its key slices' (key_slices.h),
  /// through the K/V stages, which hold the scratch: from K's first stage
  /// on, over V's, so V's stages must follow K's in one array (as CUDA's
  /// entry points lay them out; two threadgroup arrays, Metal's usual
  /// declaration, need not be adjacent: the emulator's test kernel,
  /// tests/metal_emu/kernels/quantized_key_slices.metal, declares one).
  static FA_FUNC void merge_key_slices(
      FA_THREAD Step& st,
      const FA_THREAD Pipeline& pipe,
      int slice,
      lane_t lane) {
    static_assert(
        AttnKeySliceScratch<Shape::kKeySlices, Step>::kFloats *
                int(sizeof(float)) <=
            Shape::kStages * (KBlock::kElems + VBlock::kElems) *
                int(sizeof(T)),
        "the key slices' merge needs more than the K/V stages");
    attention_merge_key_slices<Shape::kKeySlices>(
        st, reinterpret_cast<FA_THREADGROUP float*>(pipe.src.k_smem), slice,
        lane);
  }

  /// The producer's part (one thread of it): the blocks that `mma` visits
  /// in work tile `at`, copied through `maps` (the schedule's: K's and V's
  /// tensor maps) into the stages, the ring's from `ring_base` on. Returns
  /// their count, as mma does.
  template <typename Maps>
  FA_FUNC int load(
      const FA_THREAD Maps& maps,
      AttnArrays<T> a,
      const FA_CONSTANT AttnParams& p,
      AttnFeatures f,
      AttnPlace at,
      int ring_base) const {
    const int kv_head = at.head / p.gqa_factor;
    const AttnVisitRange range =
        attention_visit_range<kBQ, kBK>(p, a.mask_blocks, f, at);
    Pipeline::produce(
        maps, kv.source(p, f, at.batch, kv_head, range.visits),
        range.n_blocks, ring_base, kv_head, at.batch);
    return range.n_blocks;
  }
};

/// The attention body: the work tiles that `sched` hands the
/// threadgroup, each run by `mainloop` (mma) into a warp's step and stored
/// by `Epilogue`. The entry point picks the three policies, as it picks the
/// target. With a producer warpgroup (attention_produce) these are the
/// math's warps, numbered from 0. A scheduler of several tiles a
/// threadgroup needs a K/V schedule that runs on across them, counting the
/// blocks of the tiles before (ring_base) as the producer does.
template <typename Epilogue, typename Mainloop, typename Scheduler>
FA_FUNC void attention_body(
    Mainloop mainloop,
    AttnArrays<typename Mainloop::T> a,
    const FA_CONSTANT AttnParams& p,
    AttnFeatures f,
    Scheduler sched,
    int warp,
    lane_t lane) {
  typedef typename Mainloop::Shape Shape;
  static_assert(
      Scheduler::kOneTile || Mainloop::Pipeline::kResumes,
      "several tiles a threadgroup need a schedule that resumes");
  int ring_base = 0;
  for (AttnWork work = sched.first(); work.valid; work = sched.next(work)) {
    const AttnWarpRows w =
        attention_warp_rows<Shape>(p, f, work.place, warp);
    typename Mainloop::Step st;
    ring_base += mainloop.mma(st, a, p, f, work.place, w, ring_base, lane);
    if constexpr (Shape::kKeySlices > 1) {
      Epilogue::store(
          st, a, p, f, work.place, attention_slice_stored_rows<Shape>(p, w),
          lane);
    } else {
      Epilogue::store(st, a, p, f, work.place, w, lane);
    }
  }
}

/// The producer warpgroup's body (its one copying thread): the same work
/// tiles as the math's, each tile's blocks copied by `mainloop` (load)
/// into the ring from where the last tile's ended.
template <typename Maps, typename Mainloop, typename Scheduler>
FA_FUNC void attention_produce(
    const FA_THREAD Maps& maps,
    Mainloop mainloop,
    AttnArrays<typename Mainloop::T> a,
    const FA_CONSTANT AttnParams& p,
    AttnFeatures f,
    Scheduler sched) {
  int ring_base = 0;
  for (AttnWork work = sched.first(); work.valid; work = sched.next(work)) {
    ring_base += mainloop.load(maps, a, p, f, work.place, ring_base);
  }
}

/// The mainloop and the epilogue of the float instances of `Shape` on
/// `Target`.
template <typename Target, typename Shape>
struct AttnParts {
  typedef typename Shape::elem_type T;
  typedef AttnMainloop<Target, Shape> Mainloop;
  typedef AttnEpilogue<Shape, Mainloop::kVCols> Epilogue;

  /// The mainloop over the call's K and V (a.k, a.v) and the stages.
  static FA_FUNC Mainloop mainloop(AttnArrays<T> a, AttnSmem<T> smem) {
    const Mainloop m = {{a.k, a.v, smem}};
    return m;
  }
};

} // namespace fa
