// One CPU attention problem, type-erased, as the kernels of every instruction
// set receive it.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn::cpu {

enum class Dtype { Float16, BFloat16, Float32 };

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
};

/// The kernel, built once per instruction set (kernel_*.cpp).
namespace generic {
void run(const Problem& problem);
}
namespace avx2 {
void run(const Problem& problem);
}

} // namespace mlx_fused_attn::cpu
