// The CUDA records of the backward's kernels (kernel_key.h says what a
// record is).
#pragma once

#include <string>

#include "mlx_fused_attn/backend/cuda/kernel_key.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_config.h"

namespace mlx_fused_attn::cuda {

/// The backward's dK/dV or dQ kernel (attention_backward_kernel.cuh).
struct AttentionBackwardKernelKey {
  static constexpr KernelFamily kFamily = KernelFamily::AttentionBackward;

  fa::BwdKernel kernel;
  fa::DType dtype;
  int head_dim; ///< of q, k and v
  fa::AttnTiles tiles; ///< the plan's for `kernel` (AttnBwdTiles)
  bool causal;
  bool has_mask; ///< a bool or additive mask array
  /// dK/dV only: the one-kernel form, dQ through atomics (its template
  /// argument is spelled only when set, the two-kernel form's default).
  bool dq_atomics = false;

  std::string expression() const {
    return std::string("fa::attention_bwd_") +
        (kernel == fa::BwdKernel::DkDv ? "dkdv" : "dq") + "_kernel<" +
        device_type_name(dtype) + ", " + std::to_string(head_dim) + ", " +
        tiles_expression(tiles) + ", " + bool_name(causal) + ", " +
        bool_name(has_mask) + (dq_atomics ? ", true>" : ">");
  }
  int threads() const {
    return tiles.warps * fa::kSimdWidth;
  }
  int smem_bytes() const {
    return fa::attention_backward_smem_bytes(
        tiles, head_dim, dtype, fa::Backend::Cuda, dq_atomics);
  }
  bool max_shared() const {
    return false;
  }
};

/// The backward's kernels of one warp a query row
/// (attention_backward_kernel.cuh).
enum class BwdRowKernel {
  RowDot, ///< D = rowsum(dO * O)
  DqConvert, ///< the one-kernel form's dQ from its fp32 accumulator
};

template <BwdRowKernel kKernel>
struct AttentionBackwardRowKey {
  static constexpr KernelFamily kFamily = KernelFamily::AttentionBackward;

  fa::DType dtype;

  std::string expression() const {
    return std::string("fa::attention_bwd_") +
        (kKernel == BwdRowKernel::RowDot ? "row_dot" : "dq_convert") +
        "_kernel<" + std::to_string(fa::kBwdRowDotWarps) + ", " +
        device_type_name(dtype) + ">";
  }
  int threads() const {
    return int(fa::kBwdRowDotWarps) * fa::kSimdWidth;
  }
  int smem_bytes() const {
    return 0;
  }
  bool max_shared() const {
    return false;
  }
};

typedef AttentionBackwardRowKey<BwdRowKernel::RowDot> AttentionBackwardRowDotKey;
typedef AttentionBackwardRowKey<BwdRowKernel::DqConvert>
    AttentionBackwardDqConvertKey;

} // namespace mlx_fused_attn::cuda
