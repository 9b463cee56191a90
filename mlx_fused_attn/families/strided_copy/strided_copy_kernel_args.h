// The arguments of the CUDA strided copy (strided_copy_kernel.cuh): the host
// (launch_common.cpp) fills them by name and passes them as the kernel's
// one argument. Plain C++, included by the host: the arrays are untyped
// addresses, which the kernel reads as its element type. By value, in the
// order of the positional arguments they replace: the sm_90a SASS is the
// same instruction for instruction (a by-value struct of the attention
// kernels' arguments was not: docs/gpu_kernels.md).
#pragma once

#include "mlx_fused_attn/families/strided_copy/strided_copy_params.h"

namespace fa {

struct StridedCopyKernelArgs {
  const void* src; ///< the source's element 0 (of this part)
  void* dst; ///< the destination's
  StridedCopyParams params;
};

} // namespace fa
