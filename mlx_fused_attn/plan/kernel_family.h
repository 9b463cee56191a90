// The kernel families: which kernels a plan picks among. A family is one
// .metal file and one NVRTC source; whether it can run on a device is the
// backends' to say (backend/kernel_availability.h).
#pragma once

#include <vector>

namespace mlx_fused_attn {

enum class KernelFamily {
  Attention, ///< the general tiled kernel (metal/attention.metal)
  ShortAttention, ///< many short sequences (metal/short_attention.metal)
  AttentionBackward, ///< the general kernel's gradients (FusedAttentionVJP)
  /// The backward's D = rowsum(dO * O) on Metal
  /// (metal/attention_backward_row_dot.metal; on CUDA AttentionBackward's).
  AttentionBackwardRowDot,
  Neighborhood, ///< NATTEN-style windows (metal/neighborhood.metal)
  Copy, ///< strided copies and output poisoning (metal/strided_copy.metal)
  /// Attention over K and V as mx.quantize stores them, dequantized as the
  /// keys are loaded (quantized_attention_planner.h).
  QuantizedAttention,
};

/// The family's name: its source's stem and the key of its JIT text.
const char* family_name(KernelFamily family);

/// Every family, in the order of the enum.
std::vector<KernelFamily> all_kernel_families();

/// The families with a CPU kernel; the others are GPU-only (on the CPU the
/// attention kernel also takes short sequences and computes its backward's
/// row dot, and reads any strides without a copy).
std::vector<KernelFamily> cpu_kernel_families();

} // namespace mlx_fused_attn
