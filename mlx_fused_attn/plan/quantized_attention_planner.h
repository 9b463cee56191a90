// The planner of attention over a quantized K/V cache: the plan of a
// validated call on a device, from the call and the device's caps alone
// (device_caps.h), as attention_planner.h does for float K and V. It builds
// no kernel and calls no backend.
#pragma once

#include "mlx_fused_attn/plan/device_caps.h"
#include "mlx_fused_attn/plan/quantized_attention_plan.h"
#include "mlx_fused_attn/plan/quantized_call.h"

namespace mlx_fused_attn {

/// The plan of a validated quantized call on a device with `caps`: family
/// QuantizedAttention, or none with the reason.
QuantizedAttentionPlan quantized_attention_plan_for(
    const QuantizedAttentionCall& call,
    const DeviceCaps& caps);

} // namespace mlx_fused_attn
