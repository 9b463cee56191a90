// The neighborhood-attention planner: the plan of a validated call on a
// device, from the call and the device's caps alone (device_caps.h), as
// attention_planner.h plans attention calls.
#pragma once

#include "mlx_fused_attn/plan/device_caps.h"
#include "mlx_fused_attn/plan/na_call.h"
#include "mlx_fused_attn/plan/na_plan.h"

namespace mlx_fused_attn {

/// The plan of a validated call on a device with `caps`: family
/// Neighborhood, or none with the reason.
NaPlan neighborhood_plan_for(const NaCall& call, const DeviceCaps& caps);

} // namespace mlx_fused_attn
