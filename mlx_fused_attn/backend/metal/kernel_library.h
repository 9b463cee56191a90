// The Metal library holding this package's kernels, for the host code of
// each kernel family: the metallib installed beside the library (AOT), or
// the embedded source compiled at run time (JIT) when MLX_FUSED_ATTN_JIT=1
// or the build has no metallib. Defined in attention_metal.cpp.
#pragma once

#include "mlx/backend/metal/device.h"

namespace mlx_fused_attn::gpu {

MTL::Library* metal_kernel_library(mlx::core::metal::Device& d);

} // namespace mlx_fused_attn::gpu
