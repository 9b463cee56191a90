// The CUDA neighborhood kernels by name: the C++ expression that names each
// instance, which NVRTC instantiates and the JIT cache is keyed by; the AOT
// objects (na_aot.cu) take the same instances' addresses. Tiles come from
// choose_na_tiles, so they are not part of the key.
#pragma once

#include <string>

#include "mlx_fused_attn/backend/cuda/kernel_names.h"
#include "mlx_fused_attn/kernels/na_config.h"

namespace mlx_fused_attn::cuda {

/// What selects a neighborhood kernel instance.
struct NaKernelKey {
  fa::DType dtype;
  int head_dim;
  int n_axes;
};

inline fa::NaTiles na_tiles(const NaKernelKey& key) {
  return fa::choose_na_tiles(
      key.head_dim, key.dtype, fa::Backend::Cuda, key.n_axes);
}

inline std::string na_kernel_expression(const NaKernelKey& key) {
  const fa::NaTiles t = na_tiles(key);
  return std::string("fa::na_attention_kernel<") +
      device_type_name(key.dtype) + ", " + std::to_string(key.head_dim) +
      ", " + std::to_string(fa::na_tile_queries(t)) + ", " +
      std::to_string(t.key_block) + ", " +
      std::to_string(t.warps) + ", " + std::to_string(t.stages) + ", " +
      std::to_string(t.min_blocks) + ", " + std::to_string(key.n_axes) + ">";
}

} // namespace mlx_fused_attn::cuda
