// The kernel families: which kernels a plan picks among. A family is one
// folder of mlx_fused_attn/families/ and one line of its registry
// (families/registry.h), from which this enum and its lists are made;
// whether a family can run on a device is the backends' to say
// (backend/kernel_availability.h).
#pragma once

#include <vector>

#include "mlx_fused_attn/families/registry.h"

namespace mlx_fused_attn {

enum class KernelFamily {
#define FA_FAMILY_ENUMERATOR(e, name, folder, cpu, cuda) e,
  FA_KERNEL_FAMILIES(FA_FAMILY_ENUMERATOR)
#undef FA_FAMILY_ENUMERATOR
};

/// The family's name: its .metal file's stem and the key of its JIT text.
const char* family_name(KernelFamily family);

/// The family's folder, mlx_fused_attn/families/<folder>/.
const char* family_folder(KernelFamily family);

/// Every family, in the registry's order.
std::vector<KernelFamily> all_kernel_families();

/// The families with a CPU kernel; the others are GPU-only (on the CPU the
/// attention kernel also takes short sequences and computes its backward's
/// row dot, and reads any strides without a copy).
std::vector<KernelFamily> cpu_kernel_families();

/// The families with an NVRTC source of their own (the CUDA backend builds
/// the backward's row dot from the backward's).
std::vector<KernelFamily> cuda_kernel_families();

} // namespace mlx_fused_attn
