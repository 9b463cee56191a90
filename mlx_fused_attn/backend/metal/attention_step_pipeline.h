// The pipeline of a kernel built on the attention step (the general, the
// quantized K/V and the backward kernels): its features as the function
// constants FA_ATTENTION_FEATURES lists, a simdgroup a warp.
#pragma once

#include <string>
#include <utility>

#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/kernels/attention_kernel_name.h"

namespace mlx_fused_attn::gpu {

inline MetalPipeline attention_step_pipeline(
    KernelFamily family,
    std::string kernel_name,
    const fa::AttnFeatures& features,
    int warps) {
  MetalPipeline p;
  p.family = family;
  p.kernel_name = std::move(kernel_name);
  p.hash_name = fa::attention_pipeline_name(p.kernel_name, features);
#define FA_FUNCTION_CONSTANT(name, index) \
  p.constants.push_back({index, features.name});
  FA_ATTENTION_FEATURES(FA_FUNCTION_CONSTANT)
#undef FA_FUNCTION_CONSTANT
  p.threads = size_t(fa::kSimdWidth) * warps;
  return p;
}

} // namespace mlx_fused_attn::gpu
