#include "mlx_fused_attn/backend/cuda/device_limits.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace mlx_fused_attn::cuda {

namespace {

int attribute(cudaDeviceAttr attr, const char* what, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    throw std::runtime_error(
        std::string("[scaled_dot_product_attention] CUDA: cannot read the ") +
        what + " of device " + std::to_string(device));
  }
  return value;
}

} // namespace

int max_smem_per_block(int device) {
  return attribute(
      cudaDevAttrMaxSharedMemoryPerBlockOptin, "shared memory limit", device);
}

int multiprocessor_count(int device) {
  return attribute(
      cudaDevAttrMultiProcessorCount, "multiprocessor count", device);
}

} // namespace mlx_fused_attn::cuda
