// The fused CPU attention: eval_cpu of the primitive.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn::cpu {

/// Allocates `out` and schedules the kernel on the CPU stream `s` through
/// MLX's command encoder, so it runs after the inputs are computed.
void attention(
    const AttentionSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::cpu
