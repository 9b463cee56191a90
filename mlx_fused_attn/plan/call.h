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

/// The inputs every call has, first in AttentionCall::inputs; the optional
/// ones follow from kCallOptional (optional_inputs).
enum CallInput {
  kCallQ,
  kCallK,
  kCallV,
  kCallOptional,
};

/// Where the optional inputs sit in a list of inputs whose optional part
/// starts at `first` (kCallOptional in a call's, kBwdMask in the
/// backward's): the mask where the call has an array mask, then the sinks
/// where it has sinks; -1 where it has not; `end` is past them (where the
/// mask's classes by block go, where a kernel reads them).
struct OptionalInputs {
  int mask;
  int sinks;
  int end;
};

inline OptionalInputs optional_inputs(const AttentionSpec& spec, int first) {
  OptionalInputs at = {-1, -1, first};
  if (spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive) {
    at.mask = at.end++;
  }
  if (spec.has_sinks) {
    at.sinks = at.end++;
  }
  return at;
}

/// Index of the mask / sinks in AttentionCall::inputs.
inline int mask_index(const AttentionSpec& spec) {
  return optional_inputs(spec, kCallOptional).mask;
}
inline int sinks_index(const AttentionSpec& spec) {
  return optional_inputs(spec, kCallOptional).sinks;
}
/// The count of AttentionCall::inputs.
inline int call_input_count(const AttentionSpec& spec) {
  return optional_inputs(spec, kCallOptional).end;
}

/// A call's inputs by name (AttentionCall::inputs, and the primitive's:
/// the call's, then the mask's classes by block at `visits_input` where
/// the plan reads them, AttentionPlan::visits_input); the absent ones null.
struct CallInputs {
  const mlx::core::array& q;
  const mlx::core::array& k;
  const mlx::core::array& v;
  const mlx::core::array* mask;
  const mlx::core::array* sinks;
  const mlx::core::array* visits;
};

inline CallInputs call_inputs(
    const AttentionSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    int visits_input = -1) {
  const OptionalInputs at = optional_inputs(spec, kCallOptional);
  return {
      inputs[kCallQ],
      inputs[kCallK],
      inputs[kCallV],
      at.mask >= 0 ? &inputs[at.mask] : nullptr,
      at.sinks >= 0 ? &inputs[at.sinks] : nullptr,
      visits_input >= 0 ? &inputs[visits_input] : nullptr};
}

/// The inputs of the fused backward (FusedAttentionVJP), in this order; from
/// kBwdMask the optional ones (optional_inputs): the mask only where the
/// call has an array mask, then the sinks where it has sinks (read only by
/// the plain-ops definition: the kernels take the sinks' share of each row
/// from the LSE), then the mask's block lists where the kernels read them
/// (AttentionPlan::lists_input).
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
  const auto& q = inputs[kCallQ];
  return {q.shape(0), q.shape(1), q.shape(2), inputs[kCallV].shape(3)};
}

} // namespace mlx_fused_attn
