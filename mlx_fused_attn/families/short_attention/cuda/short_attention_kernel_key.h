// The CUDA record of the short-sequence kernel (kernel_key.h says what a
// record is).
#pragma once

#include <string>

#include "mlx_fused_attn/backend/cuda/kernel_key.h"
#include "mlx_fused_attn/families/short_attention/short_attention_config.h"

namespace mlx_fused_attn::cuda {

/// The short-sequence kernel (short_attention_kernel.cuh).
struct ShortAttentionKernelKey {
  static constexpr KernelFamily kFamily = KernelFamily::ShortAttention;

  fa::DType dtype;
  int head_dim;
  fa::ShortAttnTiles tiles; ///< the plan's (choose_short_attention_tiles)

  std::string expression() const {
    return std::string("fa::short_attention_kernel<") +
        device_type_name(dtype) + ", " + std::to_string(head_dim) +
        ", fa::ShortTilesOf<" + std::to_string(tiles.seq) + ", " +
        std::to_string(tiles.warp_rows) + ", " + std::to_string(tiles.warps) +
        ", " + std::to_string(tiles.problems) + ">>";
  }
  int threads() const {
    return tiles.warps * fa::kSimdWidth;
  }
  int smem_bytes() const {
    return fa::short_attention_smem_bytes(tiles, head_dim, dtype);
  }
  bool max_shared() const {
    return false;
  }
};

} // namespace mlx_fused_attn::cuda
