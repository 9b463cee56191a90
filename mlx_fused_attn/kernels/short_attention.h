// The short-sequence attention kernel body, written once over the tile ops:
//
//   O = softmax(scale * Q K^T + mask) V     for several (batch, head) at once
//
// For L_q, L_k <= kSeq (at most 64). One threadgroup owns kProblems
// consecutive (batch, head) sequences. All its threads first copy Q, K and V
// of every one of them whole into threadgroup memory (16-byte copies on
// CUDA, cp.async), so each threadgroup has all its bytes in flight at once;
// then each simdgroup (warp) takes (sequence, row group) pairs in turn: a
// fragment row of queries against all keys, S = Q K^T, the masks, one
// softmax pass (the whole row is there: no running max, no rescale), P V,
// and the store. Threadgroups do not wait on each other, so many of them per
// core keep the memory busy while others compute.
//
// Semantics are the general kernel's (attention.h, attention_masks.h):
// masked scores become MaskedScore (a row masked everywhere averages V, or
// is 0 beside a sink), keys past L_k get -inf, sinks are raw logits beside
// the scaled scores, and an additive row of all -inf is NaN.
//
// `Target` supplies the fragments by role and the Loader; the entry point of
// each backend picks it and fills the features. The mask arrives as bytes: it
// holds bool or T, as the features say.
#pragma once

#include "mlx_fused_attn/kernels/attention_masks.h"
#include "mlx_fused_attn/kernels/short_attention_features.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/backend.h"
#include "mlx_fused_attn/tile/ops.h"
#include "mlx_fused_attn/tile/target.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

/// Compile-time shape of one short kernel instance; the sizes come from the
/// instantiation list, which static_asserts them against
/// choose_short_attention_tiles.
template <
    typename T,
    int kHeadDim_,
    int kSeq_,
    int kWarpRows_,
    int kWarps_,
    int kProblems_>
struct ShortShape {
  typedef T elem_type;
  FA_CONST int kHeadDim = kHeadDim_;
  FA_CONST int kSeq = kSeq_;
  FA_CONST int kWarpRows = kWarpRows_;
  FA_CONST int kWarps = kWarps_;
  FA_CONST int kProblems = kProblems_;
  FA_CONST int kThreads = kWarps * kSimdWidth;
  /// 16 bytes of padding per row put the rows that one fragment load reads
  /// in different banks (short_attention_problem_bytes counts them).
  FA_CONST int kSmemLd = kHeadDim + 16 / sizeof(T);
  /// One sequence's Q (or K, or V) block.
  FA_CONST int kBlockElems = kSeq * kSmemLd;
  /// Q, K and V of every sequence, in that order, sequence after sequence.
  FA_CONST int kSmemElems = kProblems * 3 * kBlockElems;

  static_assert(kSeq % kWarpRows == 0, "row groups must tile the sequence");
};

template <typename Target, typename Shape>
FA_FUNC void short_attention_block(
    const FA_DEVICE typename Shape::elem_type* q,
    const FA_DEVICE typename Shape::elem_type* k,
    const FA_DEVICE typename Shape::elem_type* v,
    FA_DEVICE typename Shape::elem_type* out,
    const FA_CONSTANT AttnParams& p,
    const FA_DEVICE unsigned char* mask,
    const FA_DEVICE typename Shape::elem_type* sinks,
    FA_THREADGROUP typename Shape::elem_type* smem,
    ShortAttnFeatures f,
    int block,
    int warp,
    lane_t lane) {
  typedef typename Shape::elem_type T;
  typedef typename Target::template FragA<T> FragA;
  typedef typename Target::template FragB<T> FragB;
  typedef typename Target::FragC FragC;
  constexpr int D = Shape::kHeadDim;
  constexpr int kSeq = Shape::kSeq;
  constexpr int kWarpRows = Shape::kWarpRows;
  constexpr int kLd = Shape::kSmemLd;
  constexpr int kBlock = Shape::kBlockElems;
  typedef typename Target::template Loader<T, kSeq, D, kLd, Shape::kThreads>
      Loader;

  static_assert(
      kWarpRows % FragA::kRows == 0 && kWarpRows % FragC::kRows == 0,
      "a row group must be whole fragments");
  static_assert(
      D % FragA::kCols == 0 && D % FragC::kCols == 0,
      "the head dim must be whole fragments");
  static_assert(
      kSeq % FragA::kCols == 0 && kSeq % FragC::kCols == 0,
      "the keys must be whole fragments");

  const int tid = warp * kSimdWidth + lane;
  const int n_problems = p.B * p.H_q;
  const int first = block * Shape::kProblems;
  const int problems = n_problems - first < Shape::kProblems
      ? n_problems - first
      : Shape::kProblems;

  // ------------------------------------------------------- load Q, K, V
  // Rows past L_q and L_k are zero-filled: finite, so that a masked key's
  // zero weight times its value stays zero.
  FA_UNROLL
  for (int i = 0; i < Shape::kProblems; ++i) {
    if (i < problems) {
      const int pid = first + i;
      const int batch = pid / p.H_q;
      const int head = pid - batch * p.H_q;
      const int kv_head = head / p.gqa_factor;
      FA_THREADGROUP T* dst = smem + 3 * i * kBlock;
      Loader::load_safe(
          dst,
          q + batch * p.q_strides[0] + head * p.q_strides[1],
          p.q_strides[2],
          p.L_q,
          tid);
      Loader::load_safe(
          dst + kBlock,
          k + batch * p.k_strides[0] + kv_head * p.k_strides[1],
          p.k_strides[2],
          p.L_k,
          tid);
      Loader::load_safe(
          dst + 2 * kBlock,
          v + batch * p.v_strides[0] + kv_head * p.v_strides[1],
          p.v_strides[2],
          p.L_k,
          tid);
    }
  }
  Loader::commit();
  Loader::template wait<0>();
  FA_BARRIER();

  const CausalMaskOp causal_mask = {p.causal_offset};
  const KeyLimitOp key_limit = {p.L_k};
  const int row_groups = (p.L_q + kWarpRows - 1) / kWarpRows;

  for (int item = warp; item < problems * row_groups; item += Shape::kWarps) {
    const int i = item / row_groups;
    const int row0 = (item - i * row_groups) * kWarpRows;
    const int pid = first + i;
    const int batch = pid / p.H_q;
    const int head = pid - batch * p.H_q;
    const FA_THREADGROUP T* q_block = smem + 3 * i * kBlock + row0 * kLd;
    const FA_THREADGROUP T* k_block = smem + (3 * i + 1) * kBlock;
    const FA_THREADGROUP T* v_block = smem + (3 * i + 2) * kBlock;

    // ----------------------------------------------------- S = Q K^T
    // K is stored a key per row, so K^T is read with swapped strides.
    Tile<FragA, kWarpRows / FragA::kRows, D / FragA::kCols> q_tile;
    Tile<FragC, kWarpRows / FragC::kRows, kSeq / FragC::kCols> s_tile;
    tile_load_shared<kLd, 1>(q_tile, q_block, lane);
    tile_fill(s_tile, 0.0f);
    tile_matmad_shared<FragB, 1, kLd>(s_tile, q_tile, k_block, lane);
    tile_scalar_op<MulOp>(s_tile, p.scale_log2);

    // ---------------------------------------------------------- mask
    if (f.causal) {
      tile_map_coords(s_tile, causal_mask, row0, 0, lane);
    }
    const stride_t mask_offset =
        batch * p.mask_strides[0] + head * p.mask_strides[1];
    if (f.has_mask && f.bool_mask) {
      const BoolMaskOp bool_mask = {
          reinterpret_cast<const FA_DEVICE bool*>(mask) + mask_offset,
          p.mask_strides[2],
          p.mask_strides[3],
          p.L_q,
          p.L_k};
      tile_map_coords(s_tile, bool_mask, row0, 0, lane);
    }
    if (f.has_mask && !f.bool_mask) {
      const AddMaskOp<T> add_mask = {
          reinterpret_cast<const FA_DEVICE T*>(mask) + mask_offset,
          p.mask_strides[2],
          p.mask_strides[3],
          p.L_q,
          p.L_k};
      tile_map_coords(s_tile, add_mask, row0, 0, lane);
    }
    // Last, so that no mask turns a missing key into a masked one.
    if (p.L_k < kSeq) {
      tile_map_coords(s_tile, key_limit, row0, 0, lane);
    }

    // ------------------------------------------------------- softmax
    // One pass over the whole row. A sink is one more logit: it starts the
    // max and adds exp2(sink - max) to the sum.
    constexpr int kSlots = decltype(s_tile)::kRowSlots;
    const float sink =
        f.has_sinks ? static_cast<float>(sinks[head]) * FA_LOG2E : -FA_FLT_MAX;
    float row_max[kSlots];
    float row_sum[kSlots];
    FA_UNROLL
    for (int s = 0; s < kSlots; ++s) {
      row_max[s] = sink;
    }
    row_reduce<MaxOp>(row_max, s_tile);
    row_bin_op<ExpSubOp>(s_tile, row_max);
    FA_UNROLL
    for (int s = 0; s < kSlots; ++s) {
      row_sum[s] = f.has_sinks ? FA_EXP2(sink - row_max[s]) : 0.0f;
    }
    row_reduce<SumOp>(row_sum, s_tile);

    // ----------------------------------------------------------- P V
    Tile<FragA, kWarpRows / FragA::kRows, kSeq / FragA::kCols> p_tile;
    Tile<FragC, kWarpRows / FragC::kRows, D / FragC::kCols> o_tile;
    tile_to_operand(p_tile, s_tile);
    tile_fill(o_tile, 0.0f);
    tile_matmad_shared<FragB, kLd, 1>(o_tile, p_tile, v_block, lane);
    // One reciprocal per row instead of a division per element. A row whose
    // every score was -inf has sum 0: 0 * inf is NaN, as the softmax of all
    // -inf is.
    float inv_sum[kSlots];
    FA_UNROLL
    for (int s = 0; s < kSlots; ++s) {
      inv_sum[s] = 1.0f / row_sum[s];
    }
    row_bin_op<MulOp>(o_tile, inv_sum);

    // --------------------------------------------------------- store
    FA_DEVICE T* o = out + batch * p.o_strides[0] + head * p.o_strides[1] +
        row0 * p.o_strides[2];
    const int rows_left = p.L_q - row0;
    if (rows_left >= kWarpRows) {
      tile_store_device(o, o_tile, p.o_strides[2], lane);
    } else {
      tile_store_device_safe(o, o_tile, p.o_strides[2], rows_left, D, lane);
    }
  }
}

} // namespace fa
