// What one neighborhood-attention call asks for, independent of backend: the
// op builds it once and every backend, support check and kernel chooser
// reads it.
#pragma once

#include "mlx_fused_attn/na_window.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn {

struct NaSpec {
  int n_axes; ///< spatial axes (1..3)
  fa::NaAxis axes[fa::kNaMaxAxes]; ///< per axis; unused axes {1, 1, 1, 0}
  float scale; ///< multiplies q k^T before the softmax
};

} // namespace mlx_fused_attn
