// What one attention call asks for, independent of backend: the op builds it
// once and every backend, support check and kernel chooser reads it.
#pragma once

#include <string>

#include "mlx_fused_attn/plan/plan_hint.h"

namespace mlx_fused_attn {

enum class MaskKind {
  None, ///< no mask
  Causal, ///< bottom-right aligned: query i sees key j iff j <= i + L_k - L_q
  Bool, ///< boolean array, true = attend; masked scores become finfo(dtype).min
  Additive, ///< array of the output dtype added to the scaled scores
};

struct AttentionSpec {
  float scale; ///< multiplies q k^T before the softmax
  MaskKind mask; ///< which mask, if any
  bool has_sinks; ///< one extra logit per query head that takes softmax mass
  /// An array mask with one head, which every query head reads (known from
  /// its shape: its view's strides are not, before evaluation).
  bool mask_shared_by_heads = false;
  /// An array mask with one batch entry, which every batch entry reads.
  bool mask_shared_by_batch = false;
  /// The forward also writes the rows' log-sum-exp for the fused backward,
  /// which only the general kernel does.
  bool saves_lse = false;
  /// The caller's choice among equivalent plans (plan_hint.h).
  PlanHint hint{};
  /// The caller's force_fused: its gradient raises where the fused backward
  /// cannot run, as the forward raises (op/primitive.cpp).
  bool force_fused = false;
};

/// The answer of every support check: whether a fused kernel runs, and if not
/// a sentence for the user saying why.
struct Support {
  bool ok;
  std::string reason;
  static Support yes() {
    return {true, ""};
  }
  static Support no(std::string why) {
    return {false, std::move(why)};
  }
};

} // namespace mlx_fused_attn
