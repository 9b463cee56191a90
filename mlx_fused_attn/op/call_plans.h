// The plan of a call on its stream's device: the planners' choice
// (attention_planner.h, na_planner.h) from the caps the device's backend
// reports, with the chosen kernels built by that backend before the graph
// exists. A family whose kernels do not build is taken off the caps with the
// backend's reason, and the call planned again, so that it runs the next
// family or falls back with that reason instead of failing in eval. The one
// place that calls both the planners and the backends.
#pragma once

#include "mlx_fused_attn/plan/attention_plan.h"
#include "mlx_fused_attn/plan/call.h"
#include "mlx_fused_attn/plan/na_call.h"
#include "mlx_fused_attn/plan/na_plan.h"
#include "mlx_fused_attn/plan/quantized_attention_plan.h"
#include "mlx_fused_attn/plan/quantized_call.h"

namespace mlx_fused_attn {

/// The plan for a validated call on its stream's device.
AttentionPlan plan_attention(const AttentionCall& call);

/// The plan of the fused backward of a validated call (FusedAttentionVJP,
/// backward_primitive.h) on its stream's device: family AttentionBackward,
/// or none with the reason gradients run as plain MLX ops.
AttentionPlan plan_attention_backward(const AttentionCall& call);

/// The plan for a validated neighborhood-attention call on its stream's
/// device.
NaPlan plan_neighborhood(const NaCall& call);

/// The plan for a validated call over a quantized K/V cache on its
/// stream's device.
QuantizedAttentionPlan plan_quantized_attention(
    const QuantizedAttentionCall& call);

} // namespace mlx_fused_attn
