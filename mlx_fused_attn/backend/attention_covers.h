// What the Metal and CUDA attention hosts check alike before their own
// limits: the checks that depend only on the kernel (dtype, head dims) and
// on there being work to launch.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/attention_plan.h"
#include "mlx_fused_attn/call.h"
#include "mlx_fused_attn/kernels/attention_backward_kernel_name.h"

namespace mlx_fused_attn::gpu {

/// The kernel's own limits, each "no" naming `op` (the op and backend, e.g.
/// "[scaled_dot_product_attention] Metal: "). On yes, `plan.dtype` is the
/// kernel's. Inputs are {q, k, v, ...} as gpu::plan receives them.
Support attention_kernel_covers(
    const char* op,
    const std::vector<mlx::core::array>& inputs,
    AttentionPlan& plan);

/// The backward kernels' limits (attention_backward_config.h) on top of
/// attention_kernel_covers, each "no" naming `op`; and the forward of
/// `call` must run the general kernel, the one that saves the LSE. On yes,
/// `plan.features.mask_blocks` says whether the kernels read the mask's
/// block lists (backward_reads_lists).
Support attention_backward_covers(
    const char* op,
    const AttentionCall& call,
    AttentionPlan& plan);

/// The features a backward kernel of `plan` runs with: align_q and align_k
/// by its own blocks (the dK/dV kernel's query blocks are tiles.bk rows and
/// its key blocks tiles.bq, the dQ kernel's the other way round).
fa::AttnFeatures backward_kernel_features(
    const AttentionPlan& plan,
    fa::BwdKernel kernel);

} // namespace mlx_fused_attn::gpu
