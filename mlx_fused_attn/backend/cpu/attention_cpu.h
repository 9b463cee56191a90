// The fused CPU attention: its plan (whether the CPU kernel takes a call)
// and eval_cpu of the primitive.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/attention_plan.h"
#include "mlx_fused_attn/call.h"

namespace mlx_fused_attn::cpu {

/// Admits the call's dtype and sets `plan`'s family to the CPU kernel, or
/// leaves the reason it cannot run. `plan` comes with the shapes, scale and
/// mask features set.
void plan(const AttentionCall& call, AttentionPlan& plan);

/// Allocates `out` and schedules the kernel on the CPU stream `s` through
/// MLX's command encoder, so it runs after the inputs are computed.
void run(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::cpu
