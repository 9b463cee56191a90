// The strided copy's and the output poisoning's instances, for
// tools/gen_instances.py (instance_emitter.h); the Metal file lists its
// own.
#pragma once

#include "mlx_fused_attn/families/strided_copy/cuda/strided_copy_kernel_key.h"
#include "mlx_fused_attn/families/instance_emitter.h"

namespace mlx_fused_attn::instances {

inline void enumerate_strided_copy() {
  for (fa::DType t : kDTypes) {
    cuda("strided_copy", cuda::StridedCopyKernelKey{t}.expression());
  }
  cuda("strided_copy", cuda::PoisonKernelKey{}.expression());
}

} // namespace mlx_fused_attn::instances
