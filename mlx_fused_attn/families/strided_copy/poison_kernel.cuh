// Fills an output with all-ones bytes (NaN in every float dtype) before the
// attention kernel runs, when MLX_FUSED_ATTN_POISON=1 (backend/poison.h):
// an element the kernel fails to write then fails the tests.
#pragma once

#include "mlx_fused_attn/kernels/cuda/block_sizes.h"

namespace fa {

// One translation unit includes this (a non-template kernel has one
// definition): aot/strided_copy.cu, or the JIT source.
__global__ void __launch_bounds__(kPoisonThreads)
    poison_kernel(unsigned char* dst, unsigned long long n_bytes) {
  const unsigned long long stride =
      static_cast<unsigned long long>(gridDim.x) * kPoisonThreads;
  for (unsigned long long i =
           static_cast<unsigned long long>(blockIdx.x) * kPoisonThreads +
           threadIdx.x;
       i < n_bytes;
       i += stride) {
    dst[i] = 0xff;
  }
}

} // namespace fa
