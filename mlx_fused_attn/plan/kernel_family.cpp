#include "mlx_fused_attn/plan/kernel_family.h"

namespace mlx_fused_attn {

const char* family_name(KernelFamily family) {
  switch (family) {
#define FA_FAMILY_NAME(e, name, folder, cpu, cuda) \
  case KernelFamily::e:                            \
    return #name;
    FA_KERNEL_FAMILIES(FA_FAMILY_NAME)
#undef FA_FAMILY_NAME
  }
  return "unknown";
}

const char* family_folder(KernelFamily family) {
  switch (family) {
#define FA_FAMILY_FOLDER(e, name, folder, cpu, cuda) \
  case KernelFamily::e:                              \
    return #folder;
    FA_KERNEL_FAMILIES(FA_FAMILY_FOLDER)
#undef FA_FAMILY_FOLDER
  }
  return "unknown";
}

std::vector<KernelFamily> all_kernel_families() {
  return {
#define FA_FAMILY_ANY(e, name, folder, cpu, cuda) KernelFamily::e,
      FA_KERNEL_FAMILIES(FA_FAMILY_ANY)
#undef FA_FAMILY_ANY
  };
}

std::vector<KernelFamily> cpu_kernel_families() {
  std::vector<KernelFamily> out;
#define FA_FAMILY_CPU(e, name, folder, cpu, cuda) \
  if (cpu) {                                      \
    out.push_back(KernelFamily::e);               \
  }
  FA_KERNEL_FAMILIES(FA_FAMILY_CPU)
#undef FA_FAMILY_CPU
  return out;
}

std::vector<KernelFamily> cuda_kernel_families() {
  std::vector<KernelFamily> out;
#define FA_FAMILY_CUDA(e, name, folder, cpu, cuda) \
  if (cuda) {                                      \
    out.push_back(KernelFamily::e);                \
  }
  FA_KERNEL_FAMILIES(FA_FAMILY_CUDA)
#undef FA_FAMILY_CUDA
  return out;
}

} // namespace mlx_fused_attn
