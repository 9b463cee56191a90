// Attention over a quantized K/V cache as plain MLX ops: K and V dequantized
// (mx.dequantize), then the float op's plain definition (fallback.h). The
// path for calls no fused kernel covers, and the definition vmap falls back
// to.
#pragma once

#include <string>
#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/plan/quantized_call.h"

namespace mlx_fused_attn {

mlx::core::array quantized_attention_fallback(
    const QuantizedAttentionSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::Stream s);

/// The fallback as the op returns it: a gradient or forward-mode derivative
/// taken through it raises no_gradient_message(), as through the fused
/// primitive, whichever path a device takes.
mlx::core::array quantized_attention_without_gradients(
    const QuantizedAttentionSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::Stream s);

/// Why the quantized op has no derivatives.
std::string no_gradient_message();

} // namespace mlx_fused_attn
