// The Metal matrix fragment: one 8x8 simdgroup_matrix spread over the 32
// lanes of a simdgroup, two adjacent columns of one row per lane.
//
// A fragment type (this one, or a CUDA mma.sync one) is what the generic
// Tile is built from. It provides:
//   elem_type, v[kElems]          the lane's registers
//   kRows, kCols                  the fragment's shape for its role
//   kElems, kRowsPerLane          registers per lane; distinct rows per lane
//   row(lane, e), col(lane, e)    where register e sits in the fragment
//   row_slot(e)                   which of the lane's rows register e is on
//   load_shared<kStrR, kStrC>     from threadgroup memory, compile-time strides
//   load_device[_safe], store_device[_safe]
//                                 row-major device memory, runtime row stride;
//                                 _safe checks row/col limits (loads fill)
//   reduce_row_lanes<Op>(x)       combine x over the lanes sharing a row
// and free functions, overloaded on the role types:
//   mma(D, A, B, C)               D = A * B + C
//   acc_to_operand(A, C*)         an accumulator (fp32) as an A operand
//
// Apple's simdgroup multiply takes one element type for all four matrices,
// so (as MLX's steel kernels do) every role holds fp32 and loads convert from
// the memory type; the A, B and accumulator roles are then the same type.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/platform.h"

namespace fa {

struct SimdgroupFrag {
  typedef float elem_type;

  FA_CONST int kRows = 8;
  FA_CONST int kCols = 8;
  typedef metal::simdgroup_matrix<elem_type, kRows, kCols> mat_type;
  FA_CONST int kElems = kRows * kCols / kSimdWidth;
  FA_CONST int kRowsPerLane = 1;

  elem_type v[kElems];

  // The lane layout of Apple's simdgroup_matrix (the one MLX's steel code
  // relies on): lane bits b4..b0 give row 4*b4 + 2*b2 + b1 and first
  // column 4*b3 + 2*b0.
  static FA_FUNC int row(lane_t lane, int e) {
    (void)e;
    const int qid = lane / 4;
    return (qid & 4) + (lane / 2) % 4;
  }

  static FA_FUNC int col(lane_t lane, int e) {
    const int qid = lane / 4;
    return (qid & 2) * 2 + (lane % 2) * 2 + e;
  }

  static FA_FUNC int row_slot(int e) {
    (void)e;
    return 0;
  }

  template <int kStrR, int kStrC, typename U>
  static FA_FUNC void load_shared(
      FA_THREAD SimdgroupFrag& f,
      const FA_THREADGROUP U* src,
      lane_t lane) {
    FA_UNROLL
    for (int e = 0; e < kElems; ++e) {
      f.v[e] = static_cast<elem_type>(
          src[row(lane, e) * kStrR + col(lane, e) * kStrC]);
    }
  }

  template <typename U>
  static FA_FUNC void load_device(
      FA_THREAD SimdgroupFrag& f,
      const FA_DEVICE U* src,
      stride_t ld,
      lane_t lane) {
    FA_UNROLL
    for (int e = 0; e < kElems; ++e) {
      f.v[e] = static_cast<elem_type>(src[row(lane, e) * ld + col(lane, e)]);
    }
  }

  template <typename U>
  static FA_FUNC void load_device_safe(
      FA_THREAD SimdgroupFrag& f,
      const FA_DEVICE U* src,
      stride_t ld,
      int lim_rows,
      int lim_cols,
      elem_type fill,
      lane_t lane) {
    FA_UNROLL
    for (int e = 0; e < kElems; ++e) {
      const int r = row(lane, e);
      const int c = col(lane, e);
      f.v[e] = (r < lim_rows && c < lim_cols)
          ? static_cast<elem_type>(src[r * ld + c])
          : fill;
    }
  }

  template <typename U>
  static FA_FUNC void store_device(
      const FA_THREAD SimdgroupFrag& f,
      FA_DEVICE U* dst,
      stride_t ld,
      lane_t lane) {
    FA_UNROLL
    for (int e = 0; e < kElems; ++e) {
      dst[row(lane, e) * ld + col(lane, e)] = static_cast<U>(f.v[e]);
    }
  }

  template <typename U>
  static FA_FUNC void store_device_safe(
      const FA_THREAD SimdgroupFrag& f,
      FA_DEVICE U* dst,
      stride_t ld,
      int lim_rows,
      int lim_cols,
      lane_t lane) {
    FA_UNROLL
    for (int e = 0; e < kElems; ++e) {
      const int r = row(lane, e);
      const int c = col(lane, e);
      if (r < lim_rows && c < lim_cols) {
        dst[r * ld + c] = static_cast<U>(f.v[e]);
      }
    }
  }

  // Lanes sharing a row differ in lane bits 0 and 3 (see row()).
  template <typename Op>
  static FA_FUNC elem_type reduce_row_lanes(elem_type x) {
    x = Op::apply(x, FA_SHUFFLE_XOR(x, 1));
    return Op::apply(x, FA_SHUFFLE_XOR(x, 8));
  }
};

static_assert(
    SimdgroupFrag::kCols == fragment_size(Backend::Metal),
    "fragment_size (platform.h) disagrees with the simdgroup fragment");

FA_FUNC void mma(
    FA_THREAD SimdgroupFrag& d,
    const FA_THREAD SimdgroupFrag& a,
    const FA_THREAD SimdgroupFrag& b,
    const FA_THREAD SimdgroupFrag& c) {
  SimdgroupFrag::mat_type ma, mb, mc, md;
  FA_UNROLL
  for (int e = 0; e < SimdgroupFrag::kElems; ++e) {
    ma.thread_elements()[e] = a.v[e];
    mb.thread_elements()[e] = b.v[e];
    mc.thread_elements()[e] = c.v[e];
  }
  metal::simdgroup_multiply_accumulate(md, ma, mb, mc);
  FA_UNROLL
  for (int e = 0; e < SimdgroupFrag::kElems; ++e) {
    d.v[e] = md.thread_elements()[e];
  }
}

// The operand role is fp32 on Metal (see the top of this file), so the
// probabilities go into P V unrounded, as in MLX's steel kernel.
FA_FUNC void acc_to_operand(
    FA_THREAD SimdgroupFrag& a,
    const FA_THREAD SimdgroupFrag* c) {
  a = c[0];
}

} // namespace fa
