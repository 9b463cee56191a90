// The fused CPU neighborhood attention: eval_cpu of NeighborhoodAttention
// (na_planner.h decides which calls the CPU kernel takes).
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/plan/na_plan.h"

namespace mlx_fused_attn::cpu {

/// Admits the call's dtype and sets `plan`'s family to the CPU kernel, or
/// leaves the reason it cannot run. `plan` comes with the shapes set.
/// Allocates `out` and schedules the kernel on the CPU stream `s`; the
/// kernel reads q, k, v through any strides.
void na_run(
    const NaPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::cpu
