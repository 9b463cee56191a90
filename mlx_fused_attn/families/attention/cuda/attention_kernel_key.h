// The CUDA records of the general kernel and of the combine of its split
// keys (kernel_key.h says what a record is).
#pragma once

#include <string>

#include "mlx_fused_attn/backend/cuda/kernel_key.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/cuda/block_sizes.h"

namespace mlx_fused_attn::cuda {

/// The general attention kernel (attention_kernel.cuh): attention_kernel,
/// or with a producer warpgroup attention_producer_kernel, which also takes
/// the tensor maps of K and V.
struct AttentionKernelKey {
  static constexpr KernelFamily kFamily = KernelFamily::Attention;

  fa::DType dtype;
  int head_dim; ///< of q and k
  int head_dim_v; ///< of v and the output
  fa::AttnTiles tiles; ///< the plan's (choose_attention_tiles)
  bool causal;
  bool has_mask; ///< a bool or additive mask array

  std::string expression() const {
    return std::string(
               tiles.producer ? "fa::attention_producer_kernel<"
                              : "fa::attention_kernel<") +
        device_type_name(dtype) +
        ", " + std::to_string(head_dim) + ", " + std::to_string(head_dim_v) +
        ", " + tiles_expression(tiles) + ", " + bool_name(causal) + ", " +
        bool_name(has_mask) + ">";
  }
  int threads() const {
    return fa::attention_launch_warps(tiles) * fa::kSimdWidth;
  }
  int smem_bytes() const {
    return fa::attention_smem_bytes(
        tiles, head_dim, head_dim_v, dtype, fa::Backend::Cuda);
  }
  /// Prefer all of L1 as shared memory where the tiles need it (left to
  /// itself the driver gave the D = 128 kernel a split that holds 2 of its
  /// 68 KB blocks where 3 would fit: Nsight Compute's block limit).
  bool max_shared() const {
    return fa::attention_prefers_max_shared(tiles);
  }
};

/// The combine of split keys (attention_kernel.cuh, split_keys.h): part of
/// the general kernel's family, whose source holds it.
struct SplitCombineKernelKey {
  static constexpr KernelFamily kFamily = KernelFamily::Attention;

  fa::DType dtype; ///< of the output
  fa::SplitCombineForm form; ///< the plan's (plan.combine_form)

  std::string expression() const {
    return std::string("fa::split_combine_kernel<") + device_type_name(dtype) +
        ", " + split_combine_form_expression(form) + ">";
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
