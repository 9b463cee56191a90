#include "mlx_fused_attn/plan/kernel_family.h"

namespace mlx_fused_attn {

const char* family_name(KernelFamily family) {
  switch (family) {
    case KernelFamily::Attention:
      return "attention";
    case KernelFamily::ShortAttention:
      return "short_attention";
    case KernelFamily::AttentionBackward:
      return "attention_backward";
    case KernelFamily::AttentionBackwardRowDot:
      return "attention_backward_row_dot";
    case KernelFamily::Neighborhood:
      return "neighborhood";
    case KernelFamily::Copy:
      return "strided_copy";
    case KernelFamily::QuantizedAttention:
      return "quantized_attention";
  }
  return "unknown";
}

std::vector<KernelFamily> all_kernel_families() {
  return {
      KernelFamily::Attention,
      KernelFamily::ShortAttention,
      KernelFamily::AttentionBackward,
      KernelFamily::AttentionBackwardRowDot,
      KernelFamily::Neighborhood,
      KernelFamily::Copy,
      KernelFamily::QuantizedAttention};
}

std::vector<KernelFamily> cpu_kernel_families() {
  return {
      KernelFamily::Attention,
      KernelFamily::AttentionBackward,
      KernelFamily::Neighborhood,
      KernelFamily::QuantizedAttention};
}

} // namespace mlx_fused_attn
