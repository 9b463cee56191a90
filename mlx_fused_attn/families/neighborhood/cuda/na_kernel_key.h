// The CUDA record of the neighborhood kernel (kernel_key.h says what a
// record is).
#pragma once

#include <string>

#include "mlx_fused_attn/backend/cuda/kernel_key.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"

namespace mlx_fused_attn::cuda {

/// The neighborhood kernel (na_kernel.cuh).
struct NaKernelKey {
  static constexpr KernelFamily kFamily = KernelFamily::Neighborhood;

  fa::DType dtype;
  int head_dim;
  int n_axes;
  fa::NaTiles tiles; ///< the plan's (choose_na_tiles)

  std::string expression() const {
    return std::string("fa::na_attention_kernel<") + device_type_name(dtype) +
        ", " + std::to_string(head_dim) + ", fa::NaTilesOf<" +
        std::to_string(tiles.warp_rows) + ", " +
        std::to_string(tiles.key_block) + ", " + std::to_string(tiles.warps) +
        ", " + std::to_string(tiles.stages) + ", " +
        std::to_string(tiles.min_blocks) + ">, " + std::to_string(n_axes) +
        ">";
  }
  int threads() const {
    return tiles.warps * fa::kSimdWidth;
  }
  int smem_bytes() const {
    return fa::na_smem_bytes(tiles, head_dim, dtype, n_axes);
  }
  bool max_shared() const {
    return false;
  }
};

} // namespace mlx_fused_attn::cuda
