// The fused attention backward, written once over the tile ops (Metal and
// CUDA), in FlashAttention-2's structure. Given the forward's O and row
// LSE and the output gradient dO:
//
//   D  = rowsum(dO * O)                            attention_backward_row_dot
//   P  = exp(scale Q K^T + mask - LSE),  dP = dO V^T,  dS = P (dP - D)
//   dV = P^T dO,  dK = scale dS^T Q                attention_backward_dkdv
//   dQ = scale dS K                                attention_backward_dq
//
// dQ is a kernel of its own, a query block a threadgroup looping over key
// blocks like the forward: it recomputes S and dP (two of the backward's
// five products again) but needs no atomics, which Metal lacks for floats
// on older GPUs and which would make dQ depend on the order of the key
// blocks; dK/dV threadgroups write only their own rows. On CUDA the plan
// may instead give the dK/dV kernel the Dq policy BwdDqAtomics
// (attention_backward_dq_atomics.h): dQ += dS K of every block it visits,
// through fp32 atomics, and no dQ kernel.
//
// dK/dV kernel: a threadgroup owns Shape::kBQ keys of one (batch, kv head)
// (each warp kWarpRows of them, K and V held where the target holds the
// forward's Q: registers, or shared memory for the products to read) and
// streams, through the forward's K/V pipeline, the Q and dO
// blocks of every query head of the GQA group: dK and dV are summed over
// the group in registers, K and V read once. The tiles are transposed
// (keys x queries): S^T = K Q^T and dP^T = V dO^T are the forward's
// S = Q K^T with the block types' products, dV += P^T dO and dK += dS^T Q
// its O += P V.
//
// Under an array mask both kernels visit the blocks the mask's block lists
// name (mask_visits.h; feature mask_blocks): hidden blocks are skipped,
// shown ones take the interior op, and a bool mask's others read its shown
// bits (each kernel's rows, words over its columns): a few word loads a
// block, where the mask itself takes a byte load a score, which, with the
// registers full, the compiler issues one or two at a time, each waiting
// for the last.
#pragma once

#include "mlx_fused_attn/families/attention_backward/backward_params.h"
#include "mlx_fused_attn/kernels/attention.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_args.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_grads.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/mask_visits.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/kv_pipeline.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

/// D of query row `r`, one warp a row: lanes stride the head dim, then a
/// butterfly sum.
template <typename T>
FA_FUNC void attention_backward_row_dot(
    const FA_DEVICE T* o,
    const FA_DEVICE T* dout,
    FA_DEVICE float* d,
    const FA_CONSTANT AttnBwdParams& bp,
    AttnBwdRow r,
    lane_t lane) {
  const FA_CONSTANT AttnParams& p = bp.fwd;
  if (r.row >= p.L_q) {
    return;
  }
  o += attention_bwd_row_offset(p.o_strides, r);
  dout += attention_bwd_row_offset(bp.do_strides, r);
  float acc = 0.0f;
  for (int c = int(lane); c < p.D_v; c += kSimdWidth) {
    acc += static_cast<float>(o[c]) * static_cast<float>(dout[c]);
  }
  FA_UNROLL
  for (int m = kSimdWidth / 2; m > 0; m /= 2) {
    acc += FA_SHUFFLE_XOR(acc, m);
  }
  if (lane == 0) {
    d[attention_bwd_row_index(p, r)] = acc;
  }
}

/// The mask's block lists of (batch, head): their slice (mask_visits.h).
FA_FUNC const FA_DEVICE unsigned int* backward_list_slice(
    const FA_DEVICE unsigned int* lists,
    const FA_CONSTANT AttnBwdParams& bp,
    int batch,
    int head) {
  return lists + batch * bp.list_strides[0] + head * bp.list_strides[1];
}

/// Row `row` of one kernel's `n_rows` rows of block lists (from `rows`,
/// `length` apart), as visits with that kernel's shown bits (past its
/// rows); their count into n.
FA_FUNC AttnVisits backward_visits(
    const FA_DEVICE unsigned int* rows,
    stride_t length,
    int n_rows,
    int row,
    FA_THREAD int& n) {
  const FA_DEVICE unsigned int* r = rows + row * length;
  n = int(r[0]);
  const AttnVisits v = {r + 1, rows + n_rows * length, 0};
  return v;
}

/// The query blocks the dK/dV threadgroup at `at` streams for each head of
/// its group, their count into n_qblocks: the mask's list (one for the
/// group), or under causal from the first that sees its first key (query i
/// sees key j iff j <= i + causal_offset; causal_offset < 0: every block).
template <int kBQ, int kBK>
FA_FUNC AttnVisits backward_dkdv_visits(
    const FA_DEVICE unsigned int* lists,
    const FA_CONSTANT AttnBwdParams& bp,
    AttnFeatures f,
    AttnBwdPlace at,
    FA_THREAD int& n_qblocks) {
  const FA_CONSTANT AttnParams& p = bp.fwd;
  const int key0 = at.block * kBQ;
  n_qblocks = (p.L_q + kBK - 1) / kBK;
  AttnVisits visits = {nullptr, nullptr, 0};
  if (f.mask_blocks) {
    visits = backward_visits(
        backward_list_slice(lists, bp, at.batch, at.head * p.gqa_factor),
        bp.dkdv_list_row, (p.L_k + kBQ - 1) / kBQ, at.block, n_qblocks);
  } else if (f.causal && p.causal_offset >= 0 && key0 > p.causal_offset) {
    visits.first = (key0 - p.causal_offset) / kBK;
    n_qblocks -= visits.first;
  }
  return visits;
}

/// Whether the block at rows [row0, row0 + rows) and keys [key0, key0 +
/// keys) has every row and key.
FA_FUNC bool backward_whole(
    const FA_CONSTANT AttnParams& p,
    int row0,
    int rows,
    int key0,
    int keys) {
  return row0 + rows <= p.L_q && key0 + keys <= p.L_k;
}

/// Whether a block of visit class `kind` at rows [row0, row0 + rows) and
/// keys [key0, key0 + keys) takes the interior op: whole rows and keys, all
/// visible (no mask read, under the causal cut).
FA_FUNC bool backward_interior(
    const FA_CONSTANT AttnParams& p,
    AttnFeatures f,
    int kind,
    int row0,
    int rows,
    int key0,
    int keys) {
  return (!f.has_mask || kind == kMaskShown) &&
      backward_whole(p, row0, rows, key0, keys) &&
      (!f.causal || key0 + keys - 1 <= row0 + p.causal_offset);
}

/// A masked block's op (BwdScoreGrads::apply_masked) over s and dp,
/// `whole` where the block has no rows or keys past the ends.
template <int kRead, bool kKeysAsRows, typename Scores, typename T>
FA_FUNC void backward_masked_grads(
    FA_THREAD Scores& s,
    FA_THREAD Scores& dp,
    const FA_THREAD BwdScoreGrads<T>& grads,
    bool whole,
    int row0,
    int col0,
    lane_t lane) {
  if (whole) {
    const BwdCoords<BwdMaskedGrads<T, kRead, true>, kKeysAsRows> op = {
        {grads}};
    tile_zip_coords(s, dp, op, row0, col0, lane);
  } else {
    const BwdCoords<BwdMaskedGrads<T, kRead, false>, kKeysAsRows> op = {
        {grads}};
    tile_zip_coords(s, dp, op, row0, col0, lane);
  }
}

/// A visited block as backward_block_grads takes it: its class, whether
/// it takes the interior op, whether it has every row and key
/// (backward_whole), the warp's first row and the block's first column of
/// the score tiles, and a bool mask's shown bits of the kernel (`words` a
/// row).
struct BwdBlock {
  int kind;
  bool interior;
  bool whole;
  int row0;
  int col0;
  const FA_DEVICE unsigned int* bits;
  int words;
};

/// P and dS of block b into s and dp (kKeysAsRows: rows are keys, as in
/// the dK/dV kernel): the interior op; without a mask the general op; with
/// one its op (apply_masked) reading a bool mask's shown bits
/// (kMaskTwoValued: the rows' words over the block's kBK columns, applied
/// first) or bytes, or an additive mask's values. The bits' loads are
/// issued here, after the block's products, where the compiler can still
/// hoist them under the asynchronous warpgroup products: held across the
/// products from the loop's top, they spill, and the spill's stores wait
/// for the loads before the products start.
template <bool kKeysAsRows, int kBK, typename Scores, typename T>
FA_FUNC void backward_block_grads(
    FA_THREAD Scores& s,
    FA_THREAD Scores& dp,
    const FA_THREAD BwdScoreGrads<T>& grads,
    AttnFeatures f,
    BwdBlock b,
    lane_t lane) {
  if (b.interior) {
    const BwdCoords<BwdInteriorGrads, kKeysAsRows> op = {grads.interior()};
    tile_zip_coords(s, dp, op, b.row0, b.col0, lane);
  } else if (f.has_mask && f.bool_mask && b.kind == kMaskTwoValued) {
    MaskBits<Scores, kBK> bits;
    mask_bits_load(bits, b.bits, b.words, b.row0, b.col0, lane);
    const BwdHiddenScore hidden = {};
    mask_bits_apply(s, bits, b.col0, hidden, lane);
    backward_masked_grads<kBwdHiddenInScores, kKeysAsRows>(
        s, dp, grads, b.whole, b.row0, b.col0, lane);
  } else if (f.has_mask && f.bool_mask) {
    backward_masked_grads<kBwdMaskBytes, kKeysAsRows>(
        s, dp, grads, b.whole, b.row0, b.col0, lane);
  } else if (f.has_mask) {
    backward_masked_grads<kBwdMaskValues, kKeysAsRows>(
        s, dp, grads, b.whole, b.row0, b.col0, lane);
  } else {
    const BwdCoords<BwdScoreGrads<T>, kKeysAsRows> op = {grads};
    tile_zip_coords(s, dp, op, b.row0, b.col0, lane);
  }
}

/// The dK/dV kernel's stream (kv_pipeline.h's Source): block j is query
/// block visits.block(j % n_qblocks) of query head head0 + j / n_qblocks,
/// its Q rows in the K stage and its dO rows in the V stage, as the forward
/// streams K and V (attention_load_block).
template <typename Target, typename Shape>
struct BwdQSource {
  typedef typename Shape::elem_type elem_type;
  typedef AttnKBlock<Target, Shape> QBlock;
  typedef AttnVBlock<Target, Shape> DOBlock;

  /// Lengths and strides are read from here where used (as AttnKVSource).
  const FA_CONSTANT AttnBwdParams* bp;
  const FA_DEVICE elem_type* q; ///< head0's query row 0
  const FA_DEVICE elem_type* dout;
  AttnVisits visits;
  int n_qblocks;
  int n_full_qblocks;
  bool align_q;
  FA_THREADGROUP elem_type* q_smem;
  FA_THREADGROUP elem_type* do_smem;

  FA_FUNC int head(int j) const {
    return j / n_qblocks;
  }
  FA_FUNC int q_block(int j) const {
    return visits.block(j % n_qblocks);
  }
  FA_FUNC const FA_THREADGROUP elem_type* k_block(int stage) const {
    return q_smem + stage * QBlock::kElems;
  }
  FA_FUNC const FA_THREADGROUP elem_type* v_block(int stage) const {
    return do_smem + stage * DOBlock::kElems;
  }
  FA_FUNC void load_kv(int j, int stage, int tid) const {
    const FA_CONSTANT AttnParams& p = bp->fwd;
    const AttnBlockRows rows = {p.L_q, n_full_qblocks, align_q, false};
    attention_load_block<QBlock, Shape::kBK, false>(
        q_smem + stage * QBlock::kElems, q + head(j) * p.q_strides[1],
        p.q_strides[2], rows, q_block(j), tid);
    attention_load_block<DOBlock, Shape::kBK, false>(
        do_smem + stage * DOBlock::kElems,
        dout + head(j) * bp->do_strides[1], bp->do_strides[2], rows,
        q_block(j), tid);
  }
};

/// What the dK/dV and dQ kernels share: a warp owns kWarpRows rows (keys or
/// queries) whose two operands (K and V, or Q and dO) stay where the
/// target's Q operand lives (AttnQOperand), and
/// streams blocks of kBK rows whose stage holds two blocks (`First`, then
/// `Second`); its score tiles are kWarpRows x kBK, its accumulators
/// kWarpRows x the padded head dim.
template <typename Target, typename Shape, typename First, typename Second>
struct BwdWarp {
  typedef typename Shape::elem_type T;
  typedef AttnQOperand<Target, Shape> Operand;
  typedef typename Target::template FragA<T> FragA;
  typedef typename Target::FragC FragC;
  FA_CONST int kRows = Shape::kWarpRows;
  FA_CONST int kCols = AttnPaddedHeadDim<Target, Shape::kHeadDim>::value;
  /// S or dP (transposed in the dK/dV kernel), fp32.
  typedef Tile<FragC, kRows / FragC::kRows, Shape::kBK / FragC::kCols> Scores;
  /// P or dS as the left operand of a product.
  typedef Tile<FragA, kRows / FragA::kRows, Shape::kBK / FragA::kCols>
      ScoreOperand;
  typedef Tile<FragC, kRows / FragC::kRows, kCols / FragC::kCols> Acc;
  static_assert(
      Shape::kHeadDim == Shape::kHeadDimV, "the backward takes D == D_v");
  static_assert(
      Shape::kStages > 1 || !First::kAsync,
      "the products read a stage's first block after its second lands: a "
      "staggered stage would not hold");

  /// The two products of streamed block j that both kernels start with:
  /// s = a First^T and dp = b Second^T (S and dP, or their transposes),
  /// issued as a pair (First and Second are one type at D == D_v).
  template <typename Pipeline>
  static FA_FUNC void scores(
      FA_THREAD Scores& s,
      FA_THREAD Scores& dp,
      const FA_THREAD Operand& a,
      const FA_THREAD Operand& b,
      const FA_THREAD Pipeline& pipe,
      int j,
      lane_t lane) {
    pipe.acquire(j);
    pipe.acquire_v(j);
    tile_fill(s, 0.0f);
    tile_fill(dp, 0.0f);
    First::mma_abt_pair(
        s, a, pipe.k_block(j), dp, b, pipe.v_block(j), lane);
  }
};

/// Rows [row0, row0 + kWarpRows) of an fp32 accumulator, times `scale`,
/// into dst (row stride ld) in T: only rows below `limit` and the real
/// head-dim columns.
template <int kHeadDim, int kCols, typename Tile_, typename T>
FA_FUNC void backward_store(
    FA_DEVICE T* dst,
    FA_THREAD Tile_& acc,
    float scale,
    stride_t ld,
    int rows_left,
    bool ragged,
    lane_t lane) {
  tile_scalar_op<MulOp>(acc, scale);
  if (ragged || kHeadDim < kCols) {
    if (rows_left > 0) {
      tile_store_device_safe(dst, acc, ld, rows_left, kHeadDim, lane);
    }
  } else {
    tile_store_device(dst, acc, ld, lane);
  }
}

/// The dK/dV kernel's Dq policy of the two-kernel form: dQ is the dQ
/// kernel's, so nothing to add.
struct BwdNoDq {
  FA_CONST int kSmemElems = 0;

  template <typename T, typename Operand>
  static FA_FUNC BwdNoDq start(
      AttnBwdArrays<T>,
      const FA_CONSTANT AttnBwdParams&,
      AttnBwdSmem<T>,
      const FA_THREAD Operand&,
      AttnBwdPlace,
      bool,
      int) {
    return BwdNoDq();
  }
  template <typename ScoreOperand>
  FA_FUNC void add(const FA_THREAD ScoreOperand&, int, int, int, int, lane_t)
      const {}
};

/// The dK/dV kernel's epilogue: a warp's key rows of dK (scaled) and dV.
template <typename Shape, typename Warp, typename T>
FA_FUNC void backward_store_dkdv(
    AttnBwdArrays<T> a,
    const FA_CONSTANT AttnBwdParams& bp,
    FA_THREAD typename Warp::Acc& dk_acc,
    FA_THREAD typename Warp::Acc& dv_acc,
    AttnBwdPlace at,
    int k_row0,
    bool k_ragged,
    lane_t lane) {
  const FA_CONSTANT AttnParams& p = bp.fwd;
  backward_store<Shape::kHeadDim, Warp::kCols>(
      a.dk + at.batch * bp.dk_strides[0] + at.head * bp.dk_strides[1] +
          k_row0 * bp.dk_strides[2],
      dk_acc, p.scale_log2 / FA_LOG2E, bp.dk_strides[2], p.L_k - k_row0,
      k_ragged, lane);
  backward_store<Shape::kHeadDim, Warp::kCols>(
      a.dv + at.batch * bp.dv_strides[0] + at.head * bp.dv_strides[1] +
          k_row0 * bp.dv_strides[2],
      dv_acc, 1.0f, bp.dv_strides[2], p.L_k - k_row0, k_ragged, lane);
}

template <typename Target, typename Shape, typename Dq = BwdNoDq>
FA_FUNC void attention_backward_dkdv(
    AttnBwdArrays<typename Shape::elem_type> a,
    const FA_CONSTANT AttnBwdParams& bp,
    AttnBwdSmem<typename Shape::elem_type> smem,
    AttnFeatures f,
    AttnBwdPlace at,
    int warp,
    lane_t lane) {
  typedef typename Shape::elem_type T;
  const int batch = at.batch;
  typedef BwdQSource<Target, Shape> Source;
  typedef typename Source::QBlock QBlock;
  typedef typename Source::DOBlock DOBlock;
  typedef BwdWarp<Target, Shape, QBlock, DOBlock> Warp;
  typedef KVPipelineOf<QBlock, Source, Shape::kStages> Pipeline;
  constexpr int kRows = Warp::kRows;
  constexpr int kBK = Shape::kBK;
  const FA_CONSTANT AttnParams& p = bp.fwd;

  const int key0 = at.block * Shape::kBQ;
  const int k_row0 = key0 + warp * kRows;
  const bool k_ragged = !f.align_k && at.block == p.L_k / Shape::kBQ;
  const int head0 = at.head * p.gqa_factor;
  int n_qblocks;
  const AttnVisits visits =
      backward_dkdv_visits<Shape::kBQ, kBK>(a.lists, bp, f, at, n_qblocks);

  const Source src = {
      &bp,
      a.q + batch * p.q_strides[0] + head0 * p.q_strides[1],
      a.dout + batch * bp.do_strides[0] + head0 * bp.do_strides[1],
      visits,
      n_qblocks,
      p.L_q / kBK,
      f.align_q,
      smem.first,
      smem.second};
  const int n_blocks = p.gqa_factor * src.n_qblocks;
  const Pipeline pipe =
      kv_pipeline<Pipeline>(src, n_blocks, warp * kSimdWidth + lane);

  // ------------------------------------------------------ load K and V
  typename Warp::Operand k_op;
  typename Warp::Operand v_op;
  q_load(
      k_op, a.k + batch * p.k_strides[0] + at.head * p.k_strides[1] +
          key0 * p.k_strides[2],
      p.k_strides[2], p.L_k - key0, k_ragged, smem.operands, warp, lane);
  q_load(
      v_op, a.v + batch * p.v_strides[0] + at.head * p.v_strides[1] +
          key0 * p.v_strides[2],
      p.v_strides[2], p.L_k - key0, k_ragged,
      smem.operands + Warp::Operand::kSmemElems, warp, lane);
  const Dq dq =
      Dq::start(a, bp, smem, k_op, at, k_ragged, warp * kSimdWidth + lane);

  typename Warp::Scores s_t;
  typename Warp::Scores dp_t;
  typename Warp::ScoreOperand p_t;
  typename Warp::ScoreOperand ds_t;
  typename Warp::Acc dk_acc;
  typename Warp::Acc dv_acc;
  tile_fill(dk_acc, 0.0f);
  tile_fill(dv_acc, 0.0f);

  // ----------------------------------------- the group's query blocks
  pipe.start();
  for (int j = 0; j < n_blocks; ++j) {
    // Read once, ahead of the products, as the forward reads its visits.
    const AttnVisit visit = visits.at(j % n_qblocks);
    Warp::scores(s_t, dp_t, k_op, v_op, pipe, j, lane);

    const int q0 = visit.block * kBK;
    const BwdScoreGrads<T> grads =
        backward_score_grads<T>(
            p, a.lse, a.d, a.mask, f, batch, head0 + src.head(j));
    const BwdBlock block = {
        visit.kind,
        backward_interior(p, f, visit.kind, q0, kBK, key0, Shape::kBQ),
        backward_whole(p, q0, kBK, key0, Shape::kBQ), k_row0, q0,
        visits.bits, mask_bit_words<kBK>(p.L_q)};
    backward_block_grads<true, kBK>(s_t, dp_t, grads, f, block, lane);
    tile_to_operand(p_t, s_t);
    tile_to_operand(ds_t, dp_t);

    DOBlock::mma_ab_pair(
        dv_acc, p_t, pipe.v_block(j), dk_acc, ds_t, pipe.k_block(j), lane);
    dq.add(ds_t, j, src.head(j), q0, warp, lane);
  }

  backward_store_dkdv<Shape, Warp>(
      a, bp, dk_acc, dv_acc, at, k_row0, k_ragged, lane);
}

template <typename Target, typename Shape>
FA_FUNC void attention_backward_dq(
    AttnBwdArrays<typename Shape::elem_type> a,
    const FA_CONSTANT AttnBwdParams& bp,
    AttnBwdSmem<typename Shape::elem_type> smem,
    AttnFeatures f,
    AttnBwdPlace at,
    int warp,
    lane_t lane) {
  typedef typename Shape::elem_type T;
  const int q_block = at.block;
  const int head = at.head;
  const int batch = at.batch;
  typedef AttnKVSource<Target, Shape> Source;
  typedef typename Source::KBlock KBlock;
  typedef typename Source::VBlock VBlock;
  typedef BwdWarp<Target, Shape, KBlock, VBlock> Warp;
  typedef KVPipelineOf<KBlock, Source, Shape::kStages> Pipeline;
  constexpr int kBQ = Shape::kBQ;
  constexpr int kBK = Shape::kBK;
  const FA_CONSTANT AttnParams& p = bp.fwd;

  const int q_row0 = q_block * kBQ + warp * Warp::kRows;
  const bool q_ragged = !f.align_q && q_block == p.L_q / kBQ;
  const int kv_head = head / p.gqa_factor;
  // The key blocks: the mask's list, or every block up to the causal cut.
  int n_blocks = attention_key_blocks<kBQ, kBK>(p, f.causal, q_block).end;
  AttnVisits visits = {nullptr, nullptr, 0};
  if (f.mask_blocks) {
    visits = backward_visits(
        backward_list_slice(a.lists, bp, batch, head) + bp.dq_lists_start,
        bp.dq_list_row, (p.L_q + kBQ - 1) / kBQ, q_block, n_blocks);
  }
  const AttnSmem<T> kv_smem = {smem.first, smem.second};
  const Pipeline pipe = kv_pipeline<Pipeline>(
      attention_kv_source<Target, Shape>(
          p, a.k, a.v, kv_smem, f, batch, kv_head, visits),
      n_blocks, warp * kSimdWidth + lane);
  const BwdScoreGrads<T> grads =
      backward_score_grads<T>(p, a.lse, a.d, a.mask, f, batch, head);

  // ----------------------------------------------------- load Q and dO
  typename Warp::Operand q_op;
  typename Warp::Operand do_op;
  q_load(
      q_op, a.q + batch * p.q_strides[0] + head * p.q_strides[1] +
          q_block * kBQ * p.q_strides[2],
      p.q_strides[2], p.L_q - q_block * kBQ, q_ragged, smem.operands, warp,
      lane);
  q_load(
      do_op, a.dout + batch * bp.do_strides[0] + head * bp.do_strides[1] +
          q_block * kBQ * bp.do_strides[2],
      bp.do_strides[2], p.L_q - q_block * kBQ, q_ragged,
      smem.operands + Warp::Operand::kSmemElems, warp, lane);

  typename Warp::Scores s;
  typename Warp::Scores dp;
  typename Warp::ScoreOperand ds;
  typename Warp::Acc dq_acc;
  tile_fill(dq_acc, 0.0f);

  // ------------------------------------------------------ the key blocks
  pipe.start();
  for (int i = 0; i < n_blocks; ++i) {
    // Read once, ahead of the products, as the forward reads its visits.
    const AttnVisit visit = visits.at(i);
    Warp::scores(s, dp, q_op, do_op, pipe, i, lane);
    const int key0 = visit.block * kBK;
    const BwdBlock block = {
        visit.kind,
        backward_interior(p, f, visit.kind, q_block * kBQ, kBQ, key0, kBK),
        backward_whole(p, q_block * kBQ, kBQ, key0, kBK), q_row0, key0,
        visits.bits, mask_bit_words<kBK>(p.L_k)};
    backward_block_grads<false, kBK>(s, dp, grads, f, block, lane);
    tile_to_operand(ds, dp);
    KBlock::mma_ab(dq_acc, ds, pipe.k_block(i), lane);
  }

  // ----------------------------------------------------------- store
  backward_store<Shape::kHeadDim, Warp::kCols>(
      a.dq + batch * bp.dq_strides[0] + head * bp.dq_strides[1] +
          q_row0 * bp.dq_strides[2],
      dq_acc, p.scale_log2 / FA_LOG2E, bp.dq_strides[2], p.L_q - q_row0,
      q_ragged, lane);
}

} // namespace fa
