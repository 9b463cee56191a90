// The fused CPU attention: the plans (whether the CPU kernels take a call)
// and eval_cpu of the forward and backward primitives.
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

/// Allocates the outputs {out[, lse]} and schedules the kernel on the CPU
/// stream `s` through MLX's command encoder, so it runs after the inputs
/// are computed; the LSE (backward_params.h) where it is asked for.
void run(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& outputs,
    mlx::core::Stream s);

/// The backward's plan and eval, as gpu.h's plan_backward and run_backward
/// on the GPU; the CPU's kernel takes every call its forward takes.
void plan_backward(const AttentionCall& call, AttentionPlan& plan);
void run_backward(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& grads,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::cpu
