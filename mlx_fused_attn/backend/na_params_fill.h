// The neighborhood kernel parameters (na_params.h) of one call, filled in
// one place for every backend (CPU, Metal, CUDA).
#pragma once

#include "mlx/array.h"
#include "mlx_fused_attn/na_params.h"
#include "mlx_fused_attn/na_spec.h"

namespace mlx_fused_attn {

/// Shapes of q and v, the spec's geometry and scale, and the strides of q,
/// k, v and the output as the kernel reads them.
fa::NaParams na_params(
    const NaSpec& spec,
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    const mlx::core::array& out);

} // namespace mlx_fused_attn
