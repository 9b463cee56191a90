// The neighborhood-attention half of the GPU interface (gpu.h is the
// attention half). Exactly one implementation is compiled into a build:
// families/neighborhood/metal/na_metal.cpp, families/neighborhood/cuda/na_cuda.cpp, or backend/no_gpu.cpp.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/plan/na_plan.h"

namespace mlx_fused_attn::gpu {

/// Builds (or finds) the kernel a plan that has a family runs on the
/// device of `s` (gpu.h's prepare, for neighborhood attention).
Support na_prepare(const NaPlan& plan, mlx::core::Stream s);

/// Runs a plan that has a family on the GPU stream `s`; called from
/// NeighborhoodAttention::eval_gpu. The inputs may have any strides: the
/// backend copies those its kernel cannot read in place.
void na_run(
    const NaPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::gpu
