// The short-sequence kernel on CUDA (short_attention_kernel.cuh): whether
// the kernel of a plan loads, and the kernel itself. attention_cuda.cpp
// plans and launches it as it does the general kernel: both take the same
// arguments but their features.
#pragma once

#include <cuda.h>

#include "mlx_fused_attn/plan/attention_plan.h"

namespace mlx_fused_attn::cuda {

/// Whether the short kernel of a plan with its tiles loads on `device`
/// (compute capability `arch`, 10 * major + minor) and takes its launch.
Support short_attention_ready(const AttentionPlan& plan, int device, int arch);

/// The short kernel of a plan with its tiles, loaded for `device`.
CUfunction
short_attention_function(const AttentionPlan& plan, int device, int arch);

} // namespace mlx_fused_attn::cuda
