// Inputs as the Metal kernels read them, shared by the forward and the
// backward hosts (attention_metal.cpp, attention_backward_metal.cpp).
#pragma once

#include "mlx/array.h"
#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/kernel_family.h"
#include "mlx_fused_attn/tile/target.h"

namespace mlx_fused_attn::gpu {

/// `x` with a unit stride along its last axis: `x` itself, or a contiguous
/// copy made on the GPU (kept alive until the command buffer completes).
/// Encodes its own dispatch, so it runs before the attention kernel is set.
mlx::core::array with_contiguous_rows(
    const mlx::core::array& x,
    fa::DType dtype,
    mlx::core::metal::Device& d,
    mlx::core::metal::CommandEncoder& enc);

} // namespace mlx_fused_attn::gpu
