// A validated neighborhood-attention call: what the op hands to the support
// check, the primitive and the fallback.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/na_spec.h"

namespace mlx_fused_attn {

struct NaCall {
  NaSpec spec;
  /// {q, k, v} in the output dtype, [B, *spatial, H, D] (v: D_v), any strides.
  std::vector<mlx::core::array> inputs;
  mlx::core::Stream stream;
};

/// The output shape [B, *spatial, H, D_v].
inline mlx::core::Shape na_output_shape(
    const std::vector<mlx::core::array>& inputs) {
  mlx::core::Shape shape = inputs[0].shape();
  shape.back() = inputs[2].shape(-1);
  return shape;
}

} // namespace mlx_fused_attn
