// What the CPU kernels cover, alike for every family: the element types the
// kernels are built for, and the family's availability (kernel_family.h).
#pragma once

#include "mlx/dtype.h"
#include "mlx_fused_attn/backend/kernel_family.h"
#include "mlx_fused_attn/launch_plan.h"

namespace mlx_fused_attn::cpu {

/// Whether the CPU kernel of `family` runs a call in `dtype`, and if not why.
Support kernel_covers(KernelFamily family, mlx::core::Dtype dtype);

/// Plans a call in `dtype` for the CPU kernel of `family`: sets the plan's
/// dtype and family, or leaves the reason the kernel cannot run it.
template <typename Plan>
void plan_cpu_kernel(KernelFamily family, mlx::core::Dtype dtype, Plan& plan) {
  if (admitted(kernel_covers(family, dtype), plan)) {
    plan.dtype = *mlx_fused_attn::kernel_dtype(dtype);
    plan.family = family;
  }
}

} // namespace mlx_fused_attn::cpu
