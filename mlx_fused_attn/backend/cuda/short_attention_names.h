// The CUDA short-sequence kernels by name: the C++ expression that names
// each instance, for NVRTC (which instantiates a kernel from it) and as the
// key of the kernel cache. The AOT objects (short_attention_aot.cu) take
// the same instances' addresses. Tiles come from the one chooser.
#pragma once

#include <string>

#include "mlx_fused_attn/backend/cuda/kernel_names.h"
#include "mlx_fused_attn/kernels/short_attention_config.h"

namespace mlx_fused_attn::cuda {

/// What selects a short kernel instance.
struct ShortAttentionKernelKey {
  fa::DType dtype;
  int head_dim;
  int seq; ///< the capacity short_attention_seq gives
};

inline fa::ShortAttnTiles short_attention_tiles(
    const ShortAttentionKernelKey& key) {
  return fa::choose_short_attention_tiles(
      key.head_dim, key.dtype, fa::Backend::Cuda, key.seq);
}

inline std::string short_attention_kernel_expression(
    const ShortAttentionKernelKey& key) {
  const fa::ShortAttnTiles t = short_attention_tiles(key);
  return std::string("fa::short_attention_kernel<") +
      device_type_name(key.dtype) + ", " + std::to_string(key.head_dim) +
      ", " + std::to_string(t.seq) + ", " + std::to_string(t.warp_rows) +
      ", " + std::to_string(t.warps) + ", " + std::to_string(t.problems) + ">";
}

} // namespace mlx_fused_attn::cuda
