// Neighborhood-attention kernel parameters shared by the host and every
// kernel. POD with fixed-size fields, copied byte for byte to the GPU.
#pragma once

#include "mlx_fused_attn/na_window.h"
#include "mlx_fused_attn/params.h"

namespace fa {

struct NaParams {
  int B; ///< batch
  int H; ///< heads (q, k and v share them)
  int D; ///< head dim of q and k
  int D_v; ///< head dim of v and the output
  int n_axes; ///< spatial axes in use (1, 2 or 3)
  int L; ///< tokens per image: the product of the axis lengths
  float scale_log2; ///< softmax scale times log2(e)
  NaAxis axes[kNaMaxAxes]; ///< geometry of axis 0 (slowest) .. 2 (fastest)
  /// Element strides of [batch, axis 0, axis 1, axis 2, head] for q, k, v
  /// and the output (0 for unused axes); the head dim is contiguous.
  stride_t q_strides[5];
  stride_t k_strides[5];
  stride_t v_strides[5];
  stride_t o_strides[5];
};

} // namespace fa
