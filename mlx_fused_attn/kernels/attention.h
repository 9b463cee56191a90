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
// at a time: on CUDA through a ring of kStages blocks, the copies of the
// next blocks under the math of this one, or (CUDA's large-grid tiles) a
// buffer each, their copies staggered so that each runs under the other's
// products; on Metal, whose loads return before a thread goes on, through
// one buffer each, loaded together.
// The softmax is online (running max and sum in fp32, exp2 domain), and the
// output is written once at the end.
//
// `Target` supplies the fragment types by role (FragA<T>, FragC), the K/V
// block type (KVBlock: its threadgroup-memory layout, its loader and the two
// products that read it: padded_block.h, swizzled_block.h) and where Q is
// kept (QOperand: q_in_registers.h, q_in_shared.h); the entry point
// of each backend picks it and fills the features (function constants or
// template bools). The mask arrives as bytes: it holds bool or T, as the
// features say.
#pragma once

#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/attention_masks.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/backend.h"
#include "mlx_fused_attn/tile/online_softmax.h"
#include "mlx_fused_attn/tile/ops.h"
#include "mlx_fused_attn/tile/target.h"
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
    int kHeadDimV_ = kHeadDim_>
struct AttnShape {
  typedef T elem_type;
  FA_CONST int kHeadDim = kHeadDim_; ///< of q and k
  FA_CONST int kHeadDimV = kHeadDimV_; ///< of v and the output
  FA_CONST int kBQ = kBQ_;
  FA_CONST int kBK = kBK_;
  FA_CONST int kWarps = kWarps_;
  FA_CONST int kStages = kStages_;
  FA_CONST int kThreads = kWarps * kSimdWidth;
  FA_CONST int kWarpRows = kBQ / kWarps;
  /// 16 bytes of padding per row spread the rows of a K or V block over the
  /// threadgroup memory banks (as in MLX's steel kernels).
  FA_CONST int kSmemLd = kHeadDim + 16 / sizeof(T);
  /// One K (or V) block; k_smem and v_smem each hold kStages of them.
  FA_CONST int kStageElems = kBK * kSmemLd;
  FA_CONST int kSmemElems = kStages * kStageElems;

  static_assert(kBQ % kWarps == 0, "query rows must split evenly over warps");
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

/// Starts the copy of key block `kb` (keys kb * kBK onwards) of K or V,
/// whose keys are `stride` apart, into `smem`; a ragged last block
/// zero-fills its missing keys.
template <typename Block, typename Shape>
FA_FUNC void load_key_block(
    FA_THREADGROUP typename Shape::elem_type* smem,
    const FA_DEVICE typename Shape::elem_type* src,
    stride_t stride,
    int L_k,
    int kb,
    bool ragged,
    int tid) {
  const int key0 = kb * Shape::kBK;
  src += key0 * stride;
  if (ragged) {
    Block::load_safe(smem, src, stride, L_k - key0, tid);
  } else {
    Block::load(smem, src, stride, tid);
  }
}

template <typename Target, typename Shape>
FA_FUNC void attention_block(
    const FA_DEVICE typename Shape::elem_type* q,
    const FA_DEVICE typename Shape::elem_type* k,
    const FA_DEVICE typename Shape::elem_type* v,
    FA_DEVICE typename Shape::elem_type* out,
    const FA_CONSTANT AttnParams& p,
    const FA_DEVICE unsigned char* mask,
    const FA_DEVICE typename Shape::elem_type* sinks,
    FA_THREADGROUP typename Shape::elem_type* k_smem,
    FA_THREADGROUP typename Shape::elem_type* v_smem,
    AttnFeatures f,
    int q_block,
    int head,
    int batch,
    int warp,
    lane_t lane) {
  typedef typename Shape::elem_type T;
  typedef typename Target::template FragA<T> FragA;
  typedef typename Target::FragC FragC;
  // The copies of K and V blocks commit and wait as one group: the groups
  // are the thread's (KBlock::commit and VBlock::commit are the same).
  typedef AttnKBlock<Target, Shape> KBlock;
  typedef AttnVBlock<Target, Shape> VBlock;
  typedef AttnQOperand<Target, Shape> QOperand;
  // The columns of Q and K, and of V and O, in the products.
  constexpr int kQKCols = AttnPaddedHeadDim<Target, Shape::kHeadDim>::value;
  constexpr int kVCols = AttnPaddedHeadDim<Target, Shape::kHeadDimV>::value;
  constexpr int kBQ = Shape::kBQ;
  constexpr int kBK = Shape::kBK;
  constexpr int kWarpRows = Shape::kWarpRows;
  constexpr int kStages = Shape::kStages;

  static_assert(
      kWarpRows % FragA::kRows == 0 && kWarpRows % FragC::kRows == 0,
      "a warp's query rows must be whole fragments");
  static_assert(
      kQKCols % FragA::kCols == 0 && kVCols % FragC::kCols == 0,
      "the padded head dims must be whole fragments");
  static_assert(
      kBK % FragA::kCols == 0 && kBK % FragC::kCols == 0,
      "the key block must be whole fragments");

  QOperand q_op;
  Tile<FragC, kWarpRows / FragC::kRows, kBK / FragC::kCols> s_tile;
  Tile<FragA, kWarpRows / FragA::kRows, kBK / FragA::kCols> p_tile;
  Tile<FragC, kWarpRows / FragC::kRows, kVCols / FragC::kCols> o_tile;
  OnlineSoftmax<decltype(s_tile)::kRowSlots> softmax;

  const int tid = warp * kSimdWidth + lane;
  const int q_row0 = q_block * kBQ + warp * kWarpRows;
  const int q_rows_left = p.L_q - q_row0;
  const bool q_ragged = !f.align_q && q_block == p.L_q / kBQ;
  const int kv_head = head / p.gqa_factor;

  q += batch * p.q_strides[0] + head * p.q_strides[1] +
      q_block * kBQ * p.q_strides[2];
  k += batch * p.k_strides[0] + kv_head * p.k_strides[1];
  v += batch * p.v_strides[0] + kv_head * p.v_strides[1];
  out +=
      batch * p.o_strides[0] + head * p.o_strides[1] + q_row0 * p.o_strides[2];

  // Sinks are raw logits, not scaled: MLX puts them beside the scaled scores.
  if (f.has_sinks) {
    softmax_init(softmax, static_cast<float>(sinks[head]) * FA_LOG2E, 1.0f);
  } else {
    softmax_init(softmax, -FA_FLT_MAX, 0.0f);
  }
  tile_fill(o_tile, 0.0f);

  // Key blocks to visit. Causal: query i sees keys j <= i + causal_offset,
  // so blocks right of the block's last diagonal are skipped and blocks left
  // of its first diagonal need no mask. Rows with i + causal_offset < 0 see
  // no key at all; MLX gives them a uniform softmax over every key, so a
  // query block holding such a row visits (and masks) every key block.
  const int n_kblocks = (p.L_k + kBK - 1) / kBK;
  const int n_full_kblocks = p.L_k / kBK;
  int kb_end = n_kblocks;
  int kb_causal = n_kblocks;
  if (f.causal) {
    const int first_row = q_block * kBQ;
    const int last_row =
        (first_row + kBQ < p.L_q ? first_row + kBQ : p.L_q) - 1;
    const int first_limit = first_row + p.causal_offset;
    const int last_limit = last_row + p.causal_offset;
    if (first_limit >= 0) {
      const int kb_diag = last_limit / kBK + 1;
      kb_end = kb_diag < n_kblocks ? kb_diag : n_kblocks;
      kb_causal = (first_limit + 1) / kBK;
    } else {
      kb_causal = 0;
    }
  }

  // In mask elements, which are bytes for a bool mask and T for an additive
  // one: the pointer moves only once its element type is known.
  const stride_t mask_offset =
      batch * p.mask_strides[0] + head * p.mask_strides[1];
  const CausalMaskOp causal_mask = {p.causal_offset};
  const KeyLimitOp key_limit = {p.L_k};

  // ---------------------------------------------------------------- load Q
  // First, and with no commit of its own: a Q copied into threadgroup memory
  // (asynchronously) joins the copy group of key block 0, so the wait and
  // barrier before block 0's products cover it; that memory follows the V
  // stages. Register loads do not block until the first product, so their
  // latency overlaps the first K/V copies either way.
  q_load(
      q_op, q, p.q_strides[2], p.L_q - q_block * kBQ, q_ragged,
      v_smem + kStages * VBlock::kElems, warp, lane);

  // Three schedules of the K/V copies. Ring (kStages > 1, CUDA): K and V
  // blocks share a ring of kStages; blocks 0 .. kStages - 2 start before the
  // loop, and every iteration commits one group (empty past the last block),
  // so that at the top of iteration kb, waiting for all but the newest
  // kStages - 2 groups means: block kb has landed. Staggered (one stage,
  // asynchronous copies: CUDA's large-grid tiles): K and V have a buffer
  // each, and their copies alternate half an iteration apart, V's block kb
  // under S_kb and the softmax, K's block kb + 1 under P V_kb; still two
  // barriers an iteration. Plain (one stage, loads that return before the
  // thread goes on: Metal): both blocks loaded together between two
  // barriers, so that their latencies overlap each other.
  constexpr bool kStaggered = kStages == 1 && KBlock::kAsync;
  if (kStaggered) {
    load_key_block<KBlock, Shape>(
        k_smem, k, p.k_strides[2], p.L_k, 0, !f.align_k && n_full_kblocks == 0,
        tid);
    KBlock::commit();
  }
  for (int kb = 0; kb < kStages - 1; ++kb) {
    if (kb < kb_end) {
      const bool ragged = !f.align_k && kb == n_full_kblocks;
      load_key_block<KBlock, Shape>(
          k_smem + kb * KBlock::kElems, k, p.k_strides[2], p.L_k, kb, ragged,
          tid);
      load_key_block<VBlock, Shape>(
          v_smem + kb * VBlock::kElems, v, p.v_strides[2], p.L_k, kb, ragged,
          tid);
    }
    KBlock::commit();
  }

  for (int kb = 0; kb < kb_end; ++kb) {
    const int key0 = kb * kBK;
    const bool k_ragged = !f.align_k && kb == n_full_kblocks;

    // ---------------------------------------------------------- load K, V
    // Ring: block kb + kStages - 1 fills the stage of block kb - 1; the one
    // barrier comes after this thread's copies of kb have landed and before
    // the next block's copies start, so after it kb is visible and kb - 1
    // free. Plain: that stage is kb's own: a barrier, the load, and a
    // barrier before reading it. Staggered: after this thread's copy of K's
    // block kb has landed, the barrier makes it everyone's and tells that
    // every warp is done with V's block kb - 1, whose buffer V's block kb
    // then takes.
    KBlock::template wait<(kStages > 1 ? kStages - 2 : 0)>();
    FA_BARRIER();
    if (kStaggered) {
      load_key_block<VBlock, Shape>(
          v_smem, v, p.v_strides[2], p.L_k, kb, k_ragged, tid);
    } else if (kb + kStages - 1 < kb_end) {
      const int kb_next = kb + kStages - 1;
      const int stage = kb_next % kStages;
      const bool ragged = !f.align_k && kb_next == n_full_kblocks;
      load_key_block<KBlock, Shape>(
          k_smem + stage * KBlock::kElems, k, p.k_strides[2], p.L_k, kb_next,
          ragged, tid);
      load_key_block<VBlock, Shape>(
          v_smem + stage * VBlock::kElems, v, p.v_strides[2], p.L_k, kb_next,
          ragged, tid);
    }
    KBlock::commit();
    if (kStages == 1 && !kStaggered) {
      KBlock::template wait<0>();
      FA_BARRIER();
    }
    const FA_THREADGROUP T* k_block = k_smem + (kb % kStages) * KBlock::kElems;
    const FA_THREADGROUP T* v_block = v_smem + (kb % kStages) * VBlock::kElems;

    // ------------------------------------------------------- S = Q K^T
    tile_fill(s_tile, 0.0f);
    KBlock::mma_abt(s_tile, q_op, k_block, lane);

    // ------------------------------------------------------------ mask
    // Masks act on scores in the exp2 domain, so a block with any mask is
    // scaled first. Unmasked blocks (nearly all, without an array mask)
    // hand the raw products to the softmax, which scales them in the FFMA
    // that also subtracts the max; that needs a positive scale.
    const bool causal_block = f.causal && kb >= kb_causal;
    float score_scale = p.scale_log2;
    if (causal_block || f.has_mask || k_ragged || !(p.scale_log2 > 0.0f)) {
      tile_scalar_op<MulOp>(s_tile, p.scale_log2);
      score_scale = 1.0f;
    }
    if (causal_block) {
      tile_map_coords(s_tile, causal_mask, q_row0, key0, lane);
    }
    if (f.has_mask && f.bool_mask) {
      const BoolMaskOp bool_mask = {
          reinterpret_cast<const FA_DEVICE bool*>(mask) + mask_offset,
          p.mask_strides[2],
          p.mask_strides[3],
          p.L_q,
          p.L_k};
      tile_map_coords(s_tile, bool_mask, q_row0, key0, lane);
    }
    if (f.has_mask && !f.bool_mask) {
      const AddMaskOp<T> add_mask = {
          reinterpret_cast<const FA_DEVICE T*>(mask) + mask_offset,
          p.mask_strides[2],
          p.mask_strides[3],
          p.L_q,
          p.L_k};
      tile_map_coords(s_tile, add_mask, q_row0, key0, lane);
    }
    // Last, so that no mask turns a missing key into a masked one.
    if (k_ragged) {
      tile_map_coords(s_tile, key_limit, q_row0, key0, lane);
    }

    // --------------------------------------------------------- softmax
    softmax_step(softmax, s_tile, o_tile, score_scale);
    tile_to_operand(p_tile, s_tile);

    // ------------------------------------------------------------ P V
    // Staggered: after this thread's copy of V's block kb has landed, the
    // barrier makes it everyone's and tells that every warp is done with
    // K's block kb, whose buffer K's block kb + 1 then takes.
    if (kStaggered) {
      VBlock::template wait<0>();
      FA_BARRIER();
      if (kb + 1 < kb_end) {
        load_key_block<KBlock, Shape>(
            k_smem, k, p.k_strides[2], p.L_k, kb + 1,
            !f.align_k && kb + 1 == n_full_kblocks, tid);
      }
      KBlock::commit();
    }
    VBlock::mma_ab(o_tile, p_tile, v_block, lane);
  }

  // ----------------------------------------------------------------- store
  // Only the rows that exist, and the real columns of a padded D_v.
  softmax_finalize(o_tile, softmax);
  if (q_ragged || Shape::kHeadDimV < kVCols) {
    if (q_rows_left > 0) {
      tile_store_device_safe(
          out, o_tile, p.o_strides[2], q_rows_left, Shape::kHeadDimV, lane);
    }
  } else {
    tile_store_device(out, o_tile, p.o_strides[2], lane);
  }
}

} // namespace fa
