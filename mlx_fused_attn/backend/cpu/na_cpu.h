// The fused CPU neighborhood attention: its plan (whether the CPU kernel
// takes a call) and eval_cpu of NeighborhoodAttention.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/na_call.h"
#include "mlx_fused_attn/na_plan.h"

namespace mlx_fused_attn::cpu {

/// Admits the call's dtype and sets `plan`'s family to the CPU kernel, or
/// leaves the reason it cannot run. `plan` comes with the shapes set.
void na_plan(const NaCall& call, NaPlan& plan);

/// Allocates `out` and schedules the kernel on the CPU stream `s`; the
/// kernel reads q, k, v through any strides.
void na_run(
    const NaPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::cpu
