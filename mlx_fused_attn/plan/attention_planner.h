// The attention planner: the plan of a validated call on a device, from the
// call and the device's caps alone (device_caps.h). It picks the first
// kernel family of an ordered list that the call and the device admit
// (NATTEN style), with its tiles, grid and features; it neither builds a
// kernel nor calls a backend. Whether the chosen family's kernels build is
// the backend's to say (call_plans.h puts the two together).
#pragma once

#include <string>

#include "mlx_fused_attn/plan/attention_plan.h"
#include "mlx_fused_attn/plan/call.h"
#include "mlx_fused_attn/plan/device_caps.h"

namespace mlx_fused_attn {

/// The plan of a validated call on a device with `caps`: a family, or none
/// with the reason.
AttentionPlan attention_plan_for(
    const AttentionCall& call,
    const DeviceCaps& caps);

/// The plan of the fused backward of a validated call whose forward runs
/// `forward` (the plan of the same call): family AttentionBackward, or none
/// with the reason gradients run as plain MLX ops.
AttentionPlan attention_backward_plan_for(
    const AttentionCall& call,
    const DeviceCaps& caps,
    const AttentionPlan& forward);

/// How plan_note starts for a general-kernel plan that splits the keys
/// (a grid under one wave); the plan summary (plan_summary.h) gives it
/// a code of its own.
constexpr const char* kKeySplitsNote = "keys split";

/// What can_use_fused says of a plan that runs: the family where it is not
/// the general kernel ("short-sequence kernel: ..."), "keys split N ways"
/// where the general kernel splits the keys, else nothing.
std::string plan_note(const AttentionPlan& plan);

} // namespace mlx_fused_attn
