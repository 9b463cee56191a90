// The CUDA kernels as driver functions, from the nvcc-built objects (AOT) or
// from NVRTC (JIT), loaded once per device and kept for the process.
#pragma once

#include <cuda.h>

#include <functional>
#include <string>

#include "mlx_fused_attn/backend/cuda/kernel_names.h"
#include "mlx_fused_attn/backend/kernel_family.h"

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

/// `arch` is the device's compute capability as 10 * major + minor. The
/// attention kernel's dynamic shared memory limit is raised to what its
/// tiles need (attention_smem_bytes).
CUfunction
attention_function(const AttentionKernelKey& key, int device, int arch);
CUfunction strided_copy_function(fa::DType dtype, int device, int arch);
/// Any kernel of a family's JIT source by its expression, or its nvcc-built
/// host handle `aot_symbol` (unless the JIT is chosen), loaded as the ones
/// above are; `smem_bytes` > 0 raises its dynamic shared memory limit to
/// that.
CUfunction kernel_function(
    KernelFamily family,
    const std::string& expression,
    int device,
    int arch,
    int smem_bytes,
    const void* aot_symbol);
CUfunction poison_function(int device, int arch);

/// Whether a kernel of `family` (`expression`) loads on `device` and takes
/// `threads` threads a block, decided once (kernel_available); `load`
/// returns it as one of the functions above does.
Support kernel_ready(
    KernelFamily family,
    const std::string& expression,
    int device,
    int threads,
    const std::function<CUfunction()>& load);

/// Whether the copy kernels (strided copies of `dtype`, output poisoning)
/// that the attention and neighborhood launches may add are ready.
Support copy_kernels_ready(fa::DType dtype, int device, int arch);

} // namespace mlx_fused_attn::cuda
