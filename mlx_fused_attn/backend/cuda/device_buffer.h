// Device memory for the arrays this backend writes: kernel outputs and the
// copies it makes of inputs the kernel cannot read in place.
//
// It comes from MLX's allocator, so mx.get_active_memory(), get_peak_memory(),
// set_memory_limit() and clear_cache() see it. MLX's stream-ordered device
// allocation (cu::malloc_async) is not exported from libmlx, and
// allocator::malloc gives unified memory: page faults when a kernel first
// writes it (2.7x the kernel's time on an H200), and a synchronous copy when
// MLX's cache answers with a device buffer of the size, as it does in a
// model. So an MLX primitive makes the memory, run here as a node of the
// graph being built: it allocates on the stream's device, in stream order.
// Where MLX's cache answers with a buffer that a host read moved to unified
// memory, the buffer is given device memory before the kernel writes it
// (device_buffer.cpp; issue 46).
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"

namespace mlx_fused_attn::cuda {

/// Gives `a` a row-contiguous buffer of a.nbytes() on `s`'s device from MLX's
/// allocator, its contents unwritten: the caller's kernel writes every element.
void set_device_data(mlx::core::array& a, mlx::core::Stream s);

/// As above for several arrays, with one launch (each empty launch is a
/// kernel of about 1.4 us on an H200). `zero_first`: the launch zeroes the
/// first array, of 32-bit words, a multiple of kZeroWordsThreads of them
/// (zero_words_kernel_ptx.h's zeroed_words), in place of writing nothing.
void set_device_data(
    const std::vector<mlx::core::array*>& arrays,
    mlx::core::Stream s,
    bool zero_first = false);

} // namespace mlx_fused_attn::cuda
