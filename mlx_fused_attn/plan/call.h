// A validated attention call: what the op hands to the support check, the
// primitive and the fallback.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn {

struct AttentionCall {
  AttentionSpec spec;
  /// {q, k, v[, mask][, sinks]}: q, k, v in the output dtype; the mask
  /// broadcast (as a view) to [B, H_q, L_q, L_k], bool or the output dtype;
  /// sinks [H_q] in the output dtype.
  std::vector<mlx::core::array> inputs;
  mlx::core::Stream stream;
};

/// Index of the mask / sinks in AttentionCall::inputs.
inline int mask_index(const AttentionSpec& spec) {
  return (spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive) ? 3
                                                                          : -1;
}
inline int sinks_index(const AttentionSpec& spec) {
  return spec.has_sinks ? (mask_index(spec) < 0 ? 3 : 4) : -1;
}
/// The count of AttentionCall::inputs.
inline int call_input_count(const AttentionSpec& spec) {
  return 3 + (mask_index(spec) >= 0) + spec.has_sinks;
}

/// The inputs of the fused backward (FusedAttentionVJP), in this order; the
/// mask only where the call has an array mask, then the sinks where it has
/// sinks (read only by the plain-ops definition: the kernels take the
/// sinks' share of each row from the LSE), then the mask's block lists
/// where the kernels read them (AttentionPlan::lists_input).
enum BackwardInput {
  kBwdQ,
  kBwdK,
  kBwdV,
  kBwdOut,
  kBwdLse,
  kBwdDout,
  kBwdMask,
};

/// The output shape [B, H_q, L_q, D_v].
inline mlx::core::Shape output_shape(
    const std::vector<mlx::core::array>& inputs) {
  const auto& q = inputs[0];
  return {q.shape(0), q.shape(1), q.shape(2), inputs[2].shape(3)};
}

} // namespace mlx_fused_attn
