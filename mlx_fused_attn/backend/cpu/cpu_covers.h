// What the CPU kernels cover, alike for every family: the element types the
// kernels are built for, and the family's availability (kernel_family.h).
#pragma once

#include "mlx/dtype.h"
#include "mlx_fused_attn/backend/kernel_family.h"

namespace mlx_fused_attn::cpu {

/// Whether the CPU kernel of `family` runs a call in `dtype`, and if not why.
Support kernel_covers(KernelFamily family, mlx::core::Dtype dtype);

} // namespace mlx_fused_attn::cpu
