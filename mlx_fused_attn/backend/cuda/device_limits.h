// What a CUDA device allows a kernel launch, read from the runtime: the
// limits that the host code checks tiles against and sizes grids by.
#pragma once

namespace mlx_fused_attn::cuda {

/// The most dynamic shared memory one block of `device` may ask for (the
/// opt-in limit, above the default 48 KB).
int max_smem_per_block(int device);

/// The multiprocessors of `device`: one wave of a grid is this many times
/// the blocks each can hold.
int multiprocessor_count(int device);

} // namespace mlx_fused_attn::cuda
