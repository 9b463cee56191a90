// A caller's choice among plans that compute the same attention: where the
// planner has several kernels or launches for a call (the short kernel or
// the general one, how many ways to split the keys, the Metal kernel's
// variants), a hint picks one per call. The tuner times each choice
// (python/mlx_fused_attn/tuning.py) and patch_mx_fast passes the winner's
// hint with the call, so that a tuned table drives the plan without
// process-wide switches (kernel_switches.h, MLX_FUSED_ATTN_METAL_VARIANT),
// which stay for benchmarks and tests. The default hint is the planner's
// own choice.
#pragma once

#include <optional>

#include "mlx_fused_attn/kernels/attention_config.h"

namespace mlx_fused_attn {

struct PlanHint {
  /// false: the general kernel takes the calls the short kernel would.
  bool short_kernel = true;
  /// Above 0: split each query block's keys at most this many ways (1:
  /// never); 0: as many as the planner finds worth it (split_count.h).
  int max_key_splits = 0;
  /// Metal: run this variant of the general kernel instead of the one
  /// MLX_FUSED_ATTN_METAL_VARIANT names; other backends ignore it.
  std::optional<fa::MetalAttnVariant> metal_variant;
};

} // namespace mlx_fused_attn
