// The CUDA records of the strided copy and the output poisoning
// (kernel_key.h says what a record is).
#pragma once

#include <string>

#include "mlx_fused_attn/backend/cuda/kernel_key.h"
#include "mlx_fused_attn/kernels/cuda/block_sizes.h"

namespace mlx_fused_attn::cuda {

/// The strided copy (strided_copy_kernel.cuh) of inputs the kernels cannot
/// read in place.
struct StridedCopyKernelKey {
  static constexpr KernelFamily kFamily = KernelFamily::Copy;

  fa::DType dtype;

  std::string expression() const {
    return std::string("fa::strided_copy_kernel<") + device_type_name(dtype) +
        ">";
  }
  int threads() const {
    return fa::kStridedCopyThreads;
  }
  int smem_bytes() const {
    return 0;
  }
  bool max_shared() const {
    return false;
  }
};

/// The output poisoning (poison_kernel.cuh).
struct PoisonKernelKey {
  static constexpr KernelFamily kFamily = KernelFamily::Copy;

  std::string expression() const {
    return "fa::poison_kernel";
  }
  int threads() const {
    return fa::kPoisonThreads;
  }
  int smem_bytes() const {
    return 0;
  }
  bool max_shared() const {
    return false;
  }
};

} // namespace mlx_fused_attn::cuda
