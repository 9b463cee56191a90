// The attention masks as element ops for tile_map_coords: each maps a score
// (exp2 domain) at query row r and key column c to its masked value. Rows and
// columns are absolute positions in the [L_q, L_k] score matrix.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/backend.h"

namespace fa {

/// What a masked score becomes. MLX replaces a masked score with
/// finfo(dtype).min: finite, the same for every masked key, and below every
/// real score, so a row whose keys are all masked gets a uniform softmax (the
/// mean of V) and a sink then takes all the mass. This value does the same in
/// the exp2 domain; half of FLT_MAX stays finite when scaled by log2(e) and
/// when a real score is subtracted from it.
struct MaskedScore {
  FA_CONST float value = -0.5f * FA_FLT_MAX;
};

/// Bottom-right causal: query r sees key c iff c <= r + offset.
struct CausalMaskOp {
  int offset; ///< L_k - L_q

  FA_FUNC float apply(float s, int r, int c) const {
    return c <= r + offset ? s : MaskedScore::value;
  }
};

/// Keys past L_k in a ragged last block: -inf, so that they get no weight
/// even in a row where every real key is masked.
struct KeyLimitOp {
  int l_k;

  FA_FUNC float apply(float s, int r, int c) const {
    (void)r;
    return c < l_k ? s : -FA_INFINITY;
  }
};

/// A boolean mask read through its strides (0 on broadcast axes).
struct BoolMaskOp {
  const FA_DEVICE bool* mask; ///< this (batch, head)'s [L_q, L_k] slice
  stride_t row_stride;
  stride_t col_stride;
  int l_q;
  int l_k;

  FA_FUNC float apply(float s, int r, int c) const {
    const bool in_bounds = r < l_q && c < l_k;
    return in_bounds && !mask[r * row_stride + c * col_stride]
        ? MaskedScore::value
        : s;
  }
};

/// An additive mask in the input dtype, read through its strides. It is
/// added in the exp2 domain, so it is multiplied by log2(e) first; a finite
/// value so negative that the product would leave the range (an fp32
/// finfo.min mask) becomes the masked score, as it behaves in MLX, while -inf
/// stays -inf and NaN stays NaN.
template <typename T>
struct AddMaskOp {
  const FA_DEVICE T* mask; ///< this (batch, head)'s [L_q, L_k] slice
  stride_t row_stride;
  stride_t col_stride;
  int l_q;
  int l_k;

  FA_FUNC float apply(float s, int r, int c) const {
    if (r >= l_q || c >= l_k) {
      return s;
    }
    const float m = static_cast<float>(mask[r * row_stride + c * col_stride]);
    const float m2 = m * FA_LOG2E;
    return s +
        (m2 < MaskedScore::value && m > -FA_INFINITY ? MaskedScore::value : m2);
  }
};

} // namespace fa
