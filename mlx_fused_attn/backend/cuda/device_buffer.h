// Device memory for the arrays this backend writes: kernel outputs and the
// copies it makes of inputs the kernel cannot read in place.
//
// Why not mx::allocator::malloc: on MLX's CUDA backend (0.32) it has no
// stream, and without one the allocator hands out unified memory
// (cudaMallocManaged), or first copies a cached device buffer into unified
// memory, synchronously. A kernel writing fresh managed pages takes a GPU
// page fault per page: on an H200 that cost more than the attention itself
// (B=1 H=32 L=4096 D=128 fp16: 1.1 ms of kernel, 2.9 ms a call), while
// mx.fast, whose outputs come from MLX's stream-ordered device allocator,
// ran within 15% of its kernel time. That allocator (cu::malloc_async) is
// not exported from libmlx, so this file keeps its own pool.
#pragma once

#include "mlx/array.h"
#include "mlx/backend/cuda/device.h"

namespace mlx_fused_attn::cuda {

/// Gives `a` a.nbytes() of device memory, allocated in order on the
/// encoder's stream (so reuse of memory freed by earlier calls is ordered
/// after them). The buffer is MLX's CudaBuffer, so MLX reads and moves it
/// like its own; it is not counted in mx.get_active_memory().
void set_device_data(mlx::core::array& a, mlx::core::cu::CommandEncoder& enc);

} // namespace mlx_fused_attn::cuda
