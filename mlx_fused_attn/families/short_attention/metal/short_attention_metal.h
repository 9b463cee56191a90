// The short-sequence kernel on Metal (mlx_fused_attn/families/short_attention/short_attention.metal): its
// pipeline for a plan. attention_metal.cpp plans and dispatches it as it
// does the general kernel: both take the same buffers.
#pragma once

#include "mlx_fused_attn/plan/attention_plan.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"

namespace mlx_fused_attn::gpu {

/// The short kernel's pipeline for a plan with its tiles.
MetalPipeline short_attention_pipeline(const AttentionPlan& plan);

} // namespace mlx_fused_attn::gpu
