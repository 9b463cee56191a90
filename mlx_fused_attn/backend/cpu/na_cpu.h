// The fused CPU neighborhood attention: eval_cpu of NeighborhoodAttention.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/na_spec.h"

namespace mlx_fused_attn::cpu {

void neighborhood(
    const NaSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::cpu
