// The short kernel's features for a plan, as its launch passes them (CUDA)
// or specialises its pipeline with them (Metal): the general kernel's
// features of the call (AttentionPlan::features) that the short kernel
// shares. Host code only: the kernel reads ShortAttnFeatures, never this.
#pragma once

#include "mlx_fused_attn/families/short_attention/short_attention_features.h"
#include "mlx_fused_attn/kernels/attention_features.h"

namespace mlx_fused_attn {

/// The short kernel's features, as the general kernel's are for the call.
inline fa::ShortAttnFeatures short_features(const fa::AttnFeatures& features) {
  fa::ShortAttnFeatures f{};
  f.has_mask = features.has_mask;
  f.bool_mask = features.bool_mask;
  f.causal = features.causal;
  f.has_sinks = features.has_sinks;
  return f;
}

} // namespace mlx_fused_attn
