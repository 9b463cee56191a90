// CUDA entry point of the strided copy (strided_copy.h), run on an input
// whose rows the attention kernel cannot read directly; its arguments:
// strided_copy_kernel_args.h. Grid: (ceil(shape[2] * shape[3] / 256),
// shape[1], shape[0]); block: kStridedCopyThreads.
#pragma once

#include "mlx_fused_attn/kernels/cuda/block_sizes.h"
#include "mlx_fused_attn/families/strided_copy/strided_copy.h"
#include "mlx_fused_attn/families/strided_copy/strided_copy_kernel_args.h"

namespace fa {

template <typename T>
__global__ void __launch_bounds__(kStridedCopyThreads)
    strided_copy_kernel(const StridedCopyKernelArgs args) {
  const StridedCopyParams& params = args.params;
  const int inner = blockIdx.x * kStridedCopyThreads + threadIdx.x;
  if (inner < params.shape[2] * params.shape[3]) {
    strided_copy_element(
        static_cast<const T*>(args.src), static_cast<T*>(args.dst), params,
        inner, blockIdx.y, blockIdx.z);
  }
}

} // namespace fa
