// What the Metal and CUDA attention hosts check alike before their own
// limits: the checks that depend only on the kernel (dtype, head dims) and
// on there being work to launch.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/attention_plan.h"

namespace mlx_fused_attn::gpu {

/// The kernel's own limits, each "no" naming `op` (the op and backend, e.g.
/// "[scaled_dot_product_attention] Metal: "). On yes, `plan.dtype` is the
/// kernel's. Inputs are {q, k, v, ...} as gpu::plan receives them.
Support attention_kernel_covers(
    const char* op,
    const std::vector<mlx::core::array>& inputs,
    AttentionPlan& plan);

} // namespace mlx_fused_attn::gpu
