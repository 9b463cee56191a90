// What the Metal and CUDA neighborhood hosts plan alike: the coverage checks
// that depend only on the kernel (dtype, head dims), and a launch's tiles
// and grid.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/na_plan.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn::gpu {

/// The kernel's own limits, each "no" naming `op` (the op and backend, e.g.
/// "[neighborhood_attention] Metal: "). On yes, `plan.dtype` is the
/// kernel's.
Support na_kernel_covers(
    const char* op,
    const std::vector<mlx::core::array>& inputs,
    NaPlan& plan);

/// Sets the plan's tiles (choose_na_tiles for `backend`) and grid. 1-D
/// calls take runs of tiles (fa::na_run_for) where the kernel can, so that
/// one round of threadgroups fills the `sm_count` multiprocessors (0: a
/// tile a threadgroup); `run_override` > 0 forces the run length (tests).
void plan_na_launch(
    NaPlan& plan,
    fa::Backend backend,
    int sm_count = 0,
    int run_override = 0);

} // namespace mlx_fused_attn::gpu
