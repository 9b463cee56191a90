// The CUDA kernels by name: the C++ expression that names each instance.
// NVRTC instantiates a kernel from its expression (and reports the mangled
// name); the same expression keys the JIT cache. The AOT objects take the
// same instances' addresses (attention_aot.cu). Tiles come from the one
// chooser, so they are not arguments.
#pragma once

#include <string>

#include "mlx_fused_attn/kernels/attention_config.h"

namespace mlx_fused_attn::cuda {

/// What selects an attention kernel instance.
struct AttentionKernelKey {
  fa::DType dtype;
  int head_dim; ///< of q and k
  int head_dim_v; ///< of v and the output
  bool causal;
  bool has_mask; ///< a bool or additive mask array
  bool wgmma; ///< the GPU takes warpgroup products (kernels.h, has_wgmma)
  /// More query blocks than one wave of the default tiles
  /// (choose_attention_tiles; attention_cuda.cpp decides).
  bool large_grid;
};

inline const char* device_type_name(fa::DType dtype) {
  switch (dtype) {
    case fa::DType::Float16:
      return "fa::half_t";
    case fa::DType::BFloat16:
      return "fa::bfloat_t";
    case fa::DType::Float32:
      return "float";
  }
  return "";
}

inline fa::AttnTiles attention_tiles(const AttentionKernelKey& key) {
  return fa::choose_attention_tiles(
      key.head_dim,
      key.head_dim_v,
      key.dtype,
      fa::Backend::Cuda,
      key.wgmma,
      key.large_grid);
}

inline std::string attention_kernel_expression(const AttentionKernelKey& key) {
  const fa::AttnTiles t = attention_tiles(key);
  return std::string("fa::attention_kernel<") + device_type_name(key.dtype) +
      ", " + std::to_string(key.head_dim) + ", " +
      std::to_string(key.head_dim_v) + ", " + std::to_string(t.bq) + ", " +
      std::to_string(t.bk) + ", " + std::to_string(t.warps) + ", " +
      std::to_string(t.stages) + ", " + std::to_string(t.min_blocks) + ", " +
      (t.wgmma ? "true" : "false") + ", " + (t.q_shared ? "true" : "false") +
      ", " + (key.causal ? "true" : "false") +
      ", " + (key.has_mask ? "true" : "false") + ">";
}

inline std::string strided_copy_kernel_expression(fa::DType dtype) {
  return std::string("fa::strided_copy_kernel<") + device_type_name(dtype) +
      ">";
}

inline std::string poison_kernel_expression() {
  return "fa::poison_kernel";
}

} // namespace mlx_fused_attn::cuda
