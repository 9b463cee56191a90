// The fused CPU attention: eval_cpu of the forward and backward primitives
// (the planners decide which calls the CPU kernels take).
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/plan/attention_plan.h"
#include "mlx_fused_attn/plan/call.h"

namespace mlx_fused_attn::cpu {

/// Admits the call's dtype and sets `plan`'s family to the CPU kernel, or
/// leaves the reason it cannot run. `plan` comes with the shapes, scale and
/// mask features set.
/// Allocates the outputs {out[, lse]} and schedules the kernel on the CPU
/// stream `s` through MLX's command encoder, so it runs after the inputs
/// are computed; the LSE (backward_params.h) where it is asked for.
void run(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& outputs,
    mlx::core::Stream s);

/// The eval of FusedAttentionMerge (op/merge_primitive.h): inputs are
/// the call's, then the held output and LSE; `out` and `lse` take their
/// buffers where they can be donated (else new ones), and the kernel
/// merges this call's rows into them.
void run_merge(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    mlx::core::array& lse,
    mlx::core::Stream s);

/// The backward's eval, as gpu.h's run_backward on the GPU; the CPU's
/// kernel takes every call its forward takes.
void run_backward(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& grads,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::cpu
