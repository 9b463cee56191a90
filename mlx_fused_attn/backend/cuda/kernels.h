// The CUDA kernels as driver functions, from the nvcc-built objects (AOT) or
// from NVRTC (JIT), loaded once per device and kept for the process.
#pragma once

#include <cuda.h>

#include <functional>
#include <string>

#include "mlx_fused_attn/backend/cuda/kernel_key.h"
#include "mlx_fused_attn/backend/kernel_availability.h"

namespace mlx_fused_attn::cuda {

/// Kernels come from NVRTC when MLX_FUSED_ATTN_JIT=1 (read at each call, so
/// that a test can compare both) or when the build has no AOT kernels. A
/// family broken by the test hook (family_broken_by_test) always compiles,
/// and fails, through NVRTC.
bool use_jit();

/// Whether the attention kernels on a GPU of compute capability `arch`
/// (10 * major + minor) take Hopper's warpgroup products: on sm_90, when
/// the kernels in use were built for sm_90a (NVRTC always is; the AOT
/// objects when MLX_FUSED_ATTN_CUDA_ARCHITECTURES holds 90a).
bool has_wgmma(int arch);

/// The kernel a family record names (kernel_key.h): from the
/// nvcc-built table (aot_kernels.h) unless the JIT is chosen, else compiled
/// by NVRTC for `arch` (10 * major + minor); loaded once per device and
/// kept, its dynamic shared memory limit raised to what it needs.
CUfunction load_kernel(
    KernelFamily family,
    const std::string& expression,
    int device,
    int arch,
    int smem_bytes,
    bool max_shared);

template <typename Key>
CUfunction kernel_function(const Key& key, int device, int arch) {
  return load_kernel(
      Key::kFamily,
      key.expression(),
      device,
      arch,
      key.smem_bytes(),
      key.max_shared());
}

/// Whether the kernel `expression` of `family` loads on `device` and takes
/// `threads` threads a block, decided once (kernel_available).
Support kernel_ready(
    KernelFamily family,
    const std::string& expression,
    int device,
    int threads,
    const std::function<CUfunction()>& load);

template <typename Key>
Support kernel_ready(const Key& key, int device, int arch) {
  return kernel_ready(
      Key::kFamily, key.expression(), device, key.threads(), [&] {
        return kernel_function(key, device, arch);
      });
}

/// Whether the copy kernels (strided copies of `dtype`, output poisoning)
/// that the attention and neighborhood launches may add are ready.
Support copy_kernels_ready(fa::DType dtype, int device, int arch);

} // namespace mlx_fused_attn::cuda
