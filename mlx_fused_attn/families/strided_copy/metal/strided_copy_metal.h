// The strided copy kernel on Metal (mlx_fused_attn/families/strided_copy/strided_copy.metal): row-contiguous
// copies of the inputs a kernel cannot read in place, for both ops.
#pragma once

#include "mlx/array.h"
#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/tile/platform.h"

namespace mlx_fused_attn::gpu {

/// The copy kernel's pipeline for `dtype`.
MetalPipeline strided_copy_pipeline(fa::DType dtype);

/// A row-contiguous copy of `x` (any rank), made on the GPU and kept alive
/// until the command buffer completes. Encodes its own dispatches, so it
/// runs before the caller sets its kernel's pipeline.
mlx::core::array row_contiguous_copy(
    const mlx::core::array& x,
    fa::DType dtype,
    mlx::core::metal::Device& d,
    mlx::core::metal::CommandEncoder& enc);

/// `x` with a unit stride along its last axis, as the kernels read it (their
/// loads take any other stride): `x` itself, or its row_contiguous_copy.
mlx::core::array with_contiguous_rows(
    const mlx::core::array& x,
    fa::DType dtype,
    mlx::core::metal::Device& d,
    mlx::core::metal::CommandEncoder& enc);

} // namespace mlx_fused_attn::gpu
