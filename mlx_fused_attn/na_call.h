// A validated neighborhood-attention call: what the op hands to the support
// check, the primitive and the fallback.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/na_window.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn {

struct NaSpec {
  int n_axes; ///< spatial axes (1..3)
  fa::NaAxis axes[fa::kNaMaxAxes]; ///< per axis; unused axes {1, 1, 1, 0}
  float scale;
};

struct NaCall {
  NaSpec spec;
  std::vector<mlx::core::array> inputs; ///< {q, k, v} in the output dtype
  mlx::core::Stream stream;
};

/// Plain MLX ops with the explicit [L, L] neighborhood mask: the path for
/// calls no kernel covers and the definition gradients are taken from.
mlx::core::array neighborhood_fallback(
    const NaSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::Stream s);

/// The dispatch rule for neighborhood attention.
Support neighborhood_support(const NaCall& call);

} // namespace mlx_fused_attn
