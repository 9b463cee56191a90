// What the Metal and CUDA attention hosts check alike before their own
// limits: the checks that depend only on the kernel (dtype, head dims) and
// on there being work to launch.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/spec.h"
#include "mlx_fused_attn/tile/target.h"

namespace mlx_fused_attn::gpu {

/// The kernel's element type for an MLX dtype; false for dtypes without
/// a kernel.
bool kernel_dtype(mlx::core::Dtype dtype, fa::DType* out);

/// The kernel's own limits, each "no" naming `op` (the op and backend, e.g.
/// "[scaled_dot_product_attention] Metal: "). On yes, `dtype` is the
/// kernel's. Inputs are {q, k, v, ...} as gpu::supports receives them.
Support attention_kernel_covers(
    const char* op,
    const std::vector<mlx::core::array>& inputs,
    fa::DType* dtype);

} // namespace mlx_fused_attn::gpu
