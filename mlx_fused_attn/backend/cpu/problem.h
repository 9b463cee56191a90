// The CPU kernels' problems, type-erased, as the kernels of every
// instruction set receive them.
#pragma once

#include "mlx/dtype.h"
#include "mlx_fused_attn/families/attention_backward/backward_params.h"
#include "mlx_fused_attn/plan/launch_plan.h"
#include "mlx_fused_attn/families/neighborhood/na_params.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn::cpu {

using Dtype = fa::DType;

/// The kernels' dtype of an MLX float dtype the support checks admitted.
inline Dtype kernel_dtype(mlx::core::Dtype t) {
  return *mlx_fused_attn::kernel_dtype(t);
}

struct Problem {
  fa::AttnParams p; ///< shapes, strides (batch, head, row), scale
  Dtype dtype; ///< of q, k, v, an additive mask, sinks and the output
  MaskKind mask;
  /// Element strides of the head dimension; the CPU kernel reads any layout.
  fa::stride_t q_dstride, k_dstride, v_dstride;
  const void* q;
  const void* k;
  const void* v;
  const void* mask_data; ///< bool or `dtype`, or null
  const void* sinks; ///< [H_q] of `dtype`, or null
  void* out; ///< [B, H_q, L_q, D_v], strides in p.o_strides, D_v contiguous
  float* lse; ///< the row LSE (backward_params.h) to write, or null
  /// Merge mode (op attention_merge): each row of this call merged by LSE
  /// with the held output and LSE, the attention over other keys, into
  /// `out` and `lse`; the held arrays may be those same buffers.
  bool merge = false;
  const void* held_out; ///< `dtype`, element strides held_o_strides
  fa::stride_t held_o_strides[4];
  const float* held_lse; ///< element strides held_lse_strides
  fa::stride_t held_lse_strides[3];
};

/// One attention backward problem.
struct BwdProblem {
  fa::AttnBwdParams p; ///< shapes, strides (batch, head, row), scale
  Dtype dtype; ///< of q, k, v, o, dO, an additive mask and the gradients
  MaskKind mask;
  /// Element strides of the head dimension of q, k, v, o and dO.
  fa::stride_t q_dstride, k_dstride, v_dstride, o_dstride, do_dstride;
  const void* q;
  const void* k;
  const void* v;
  const void* o; ///< the forward's output
  const float* lse; ///< the forward's row LSE, contiguous [B, H_q, L_q]
  const void* dout; ///< dO
  const void* mask_data; ///< bool or `dtype`, or null
  void* dq; ///< gradients, strides in p.d*_strides, head dim contiguous
  void* dk;
  void* dv;
};

/// One neighborhood-attention problem (q, k, v heads-last [B, *spatial, H, D]).
struct NaProblem {
  fa::NaParams p; ///< geometry, shapes, strides, scale
  Dtype dtype; ///< of q, k, v and the output
  fa::stride_t q_dstride, k_dstride, v_dstride; ///< head-dim strides
  const void* q;
  const void* k;
  const void* v;
  void* out;
};

/// Attention over a quantized K/V cache (quantized_problem.h).
struct QuantProblem;

/// The kernels, built once per instruction set (kernel_<isa>.cpp).
namespace generic {
void run(const Problem& problem);
void run(const BwdProblem& problem);
void run(const NaProblem& problem);
void run(const QuantProblem& problem);
} // namespace generic
namespace avx2 {
void run(const Problem& problem);
void run(const BwdProblem& problem);
void run(const NaProblem& problem);
void run(const QuantProblem& problem);
} // namespace avx2

/// Runs a problem with the best kernel build the processor supports.
template <typename P>
void run_best(const P& problem) {
#if defined(FA_CPU_HAS_AVX2_KERNEL)
  static const bool avx2 = __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  if (avx2) {
    return avx2::run(problem);
  }
#endif
  generic::run(problem);
}

} // namespace mlx_fused_attn::cpu
