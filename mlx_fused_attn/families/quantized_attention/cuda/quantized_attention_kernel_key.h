// The CUDA records of the quantized-KV attention family (kernel_key.h
// says what a record is): its kernel and its combine of split keys.
#pragma once

#include <string>

#include "mlx_fused_attn/backend/cuda/kernel_key.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_chunks.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_config.h"
#include "mlx_fused_attn/kernels/cuda/block_sizes.h"

namespace mlx_fused_attn::cuda {

/// The quantized-KV attention kernel (quantized_attention_kernel.cuh).
struct QuantizedAttentionKernelKey {
  static constexpr KernelFamily kFamily = KernelFamily::QuantizedAttention;

  fa::DType dtype;
  int head_dim; ///< of q, k and v
  int bits; ///< a value of K and V
  fa::AttnTiles tiles; ///< the plan's (quantized_kernel_choice.h)
  bool causal;
  bool has_mask; ///< a bool or additive mask array
  /// The loader's (plan.chunks, or Float where the words are not 16-byte
  /// aligned); Float's expression leaves the kernel's defaults out.
  fa::QuantizedChunks chunks = fa::QuantizedChunks::Float;

  std::string expression() const {
    const std::string policy = chunks == fa::QuantizedChunks::Float
        ? std::string()
        : std::string(", true, ") + fa::quantized_chunks_type(chunks);
    return std::string("fa::quantized_attention_kernel<") +
        device_type_name(dtype) + ", " + std::to_string(head_dim) + ", " +
        std::to_string(bits) + ", " + tiles_expression(tiles) + ", " +
        bool_name(causal) + ", " + bool_name(has_mask) + policy + ">";
  }
  int threads() const {
    return tiles.warps * fa::kSimdWidth;
  }
  int smem_bytes() const {
    return fa::attention_smem_bytes(
        tiles, head_dim, head_dim, dtype, fa::Backend::Cuda);
  }
  /// As the general kernel's (attention_prefers_max_shared): the decode
  /// tiles' eight blocks a multiprocessor need all of L1 as shared memory.
  bool max_shared() const {
    return fa::attention_prefers_max_shared(tiles);
  }
};

/// The quantized family's combine of split keys
/// (quantized_attention_kernel.cuh, split_keys.h).
struct QuantizedSplitCombineKernelKey {
  static constexpr KernelFamily kFamily = KernelFamily::QuantizedAttention;

  fa::DType dtype; ///< of the output
  fa::SplitCombineForm form; ///< the plan's (plan.combine_form)

  std::string expression() const {
    return std::string("fa::quantized_split_combine_kernel<") +
        device_type_name(dtype) + ", " + split_combine_form_expression(form) +
        ">";
  }
  int threads() const {
    return fa::kSplitCombineThreads;
  }
  int smem_bytes() const {
    return 0;
  }
  bool max_shared() const {
    return false;
  }
};

} // namespace mlx_fused_attn::cuda
