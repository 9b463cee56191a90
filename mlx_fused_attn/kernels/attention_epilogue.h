// The epilogue of the attention body (attention.h): where a warp's
// finished rows go, once the mainloop has run a work tile's key blocks.
// One of the body's three policies, beside the mainloop and the tile
// scheduler (as FlashAttention-3's Hopper kernels take a CollectiveEpilogue
// type). With split keys, the split's partial output and its softmax
// statistics (split_keys.h); without, the output, and before it each row's
// log-sum-exp where the backward reads it (has_lse).
#pragma once

#include "mlx_fused_attn/kernels/attention_args.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/attention_step.h"
#include "mlx_fused_attn/kernels/split_keys.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

/// Rows of a warp's output tile into `dst` (row stride ld): only the
/// `rows` that exist, and the real columns of a padded D_v.
template <typename Shape, int kVCols, typename U, typename OTile>
FA_FUNC void attention_store_rows(
    FA_DEVICE U* dst,
    const FA_THREAD OTile& o,
    stride_t ld,
    int rows,
    bool ragged,
    lane_t lane) {
  if (ragged || Shape::kHeadDimV < kVCols) {
    if (rows > 0) {
      tile_store_device_safe(dst, o, ld, rows, Shape::kHeadDimV, lane);
    }
  } else {
    tile_store_device(dst, o, ld, lane);
  }
}

/// The epilogue of instances of `Shape` whose output tiles have kVCols
/// columns (D_v padded to whole fragments).
template <typename Shape, int kVCols>
struct AttnEpilogue {
  template <typename Step>
  static FA_FUNC void store(
      FA_THREAD Step& st,
      AttnArrays<typename Shape::elem_type> a,
      const FA_CONSTANT AttnParams& p,
      AttnFeatures f,
      AttnPlace at,
      AttnWarpRows w,
      lane_t lane) {
    const int batch = at.batch;
    const int head = at.head;
    const int q_row0 = w.q_row0;
    if (f.split_keys) {
      attention_step_end(st, true);
      const stride_t row = split_row(p, at.split.index, batch, head, q_row0);
      const stride_t sums = split_row(p, at.split.count, 0, 0, 0);
      tile_store_rows<typename Step::OTile>(
          a.split_stats + row, st.softmax.row_max, p.L_q - q_row0, lane);
      tile_store_rows<typename Step::OTile>(
          a.split_stats + sums + row, st.softmax.row_sum, p.L_q - q_row0,
          lane);
      attention_store_rows<Shape, kVCols>(
          a.split_o + row * p.D_v, st.o, p.D_v, p.L_q - q_row0, w.q_ragged,
          lane);
    } else {
      // Before the end: it reads the row sum that the end divides by.
      if (f.has_lse) {
        attention_step_store_lse(
            st, a.lse + (stride_t(batch) * p.H_q + head) * p.L_q + q_row0,
            p.L_q - q_row0, lane);
      }
      attention_step_end(st);
      attention_store_rows<Shape, kVCols>(
          a.out + batch * p.o_strides[0] + head * p.o_strides[1] +
              q_row0 * p.o_strides[2],
          st.o, p.o_strides[2], p.L_q - q_row0, w.q_ragged, lane);
    }
  }
};

} // namespace fa
