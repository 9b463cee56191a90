// Test support shared by every backend: with MLX_FUSED_ATTN_POISON=1 each
// kernel's output is filled with NaN (all-ones bits, NaN in every float
// dtype) before the kernel runs, so an element it fails to write fails the
// tests' comparison. Read once, at the first call.
#pragma once

namespace mlx_fused_attn {

bool poison_outputs();

} // namespace mlx_fused_attn
