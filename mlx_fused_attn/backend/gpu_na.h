// The neighborhood-attention half of the GPU interface (gpu.h is the
// attention half). Exactly one implementation is compiled into a build:
// backend/metal/na_metal.cpp, backend/cuda/na_cuda.cpp, or backend/no_gpu.cpp.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/na_spec.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn::gpu {

/// Whether this build's neighborhood kernel covers the call; inputs are the
/// validated {q, k, v} in the output dtype.
Support na_supports(
    const NaSpec& spec,
    const std::vector<mlx::core::array>& inputs);

/// Runs the fused neighborhood kernel on the GPU stream `s`; called from
/// NeighborhoodAttention::eval_gpu only when na_supports() said yes. The
/// inputs may have any strides: the backend copies those its kernel cannot
/// read in place.
void na_eval(
    const NaSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::gpu
