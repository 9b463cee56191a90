// The public op over a quantized K/V cache: mlx-lm's
// quantized_scaled_dot_product_attention (mlx_lm/models/base.py), fused.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "mlx/array.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/op/mask_and_sinks.h"
#include "mlx_fused_attn/plan/quantized_attention_plan.h"

namespace mlx_fused_attn {

/// K or V as mx.quantize returns it in its affine mode: the packed codes
/// (uint32), one scale and one bias a group.
struct QuantizedKv {
  mlx::core::array words;
  mlx::core::array scales;
  mlx::core::array biases;
};

/// softmax(scale * q k^T + mask) v with K and V dequantized from `keys` and
/// `values` (quantized with `group_size` and `bits`), fused where a kernel
/// covers the call and as plain MLX ops otherwise (force_fused raises the
/// reason instead). Inference only: a gradient through it raises.
mlx::core::array quantized_scaled_dot_product_attention(
    const mlx::core::array& queries,
    const QuantizedKv& keys,
    const QuantizedKv& values,
    float scale,
    const Mask& mask,
    int group_size,
    int bits,
    const std::optional<mlx::core::array>& sinks = std::nullopt,
    bool force_fused = false,
    mlx::core::StreamOrDevice s = {});

/// Whether the call above would run a fused kernel, and if not why.
/// Invalid arguments raise exactly as the op does.
std::pair<bool, std::string> quantized_can_use_fused(
    const mlx::core::array& queries,
    const QuantizedKv& keys,
    const QuantizedKv& values,
    float scale,
    const Mask& mask,
    int group_size,
    int bits,
    const std::optional<mlx::core::array>& sinks = std::nullopt,
    mlx::core::StreamOrDevice s = {});

/// The plan of the call above (fused or not and why, the tiles, the CUDA
/// chunk policy and the key splits), for the tests and benchmarks that
/// check which kernel runs a call. Invalid arguments raise as the op does.
QuantizedAttentionPlan quantized_attention_plan(
    const mlx::core::array& queries,
    const QuantizedKv& keys,
    const QuantizedKv& values,
    float scale,
    const Mask& mask,
    int group_size,
    int bits,
    const std::optional<mlx::core::array>& sinks = std::nullopt,
    mlx::core::StreamOrDevice s = {});

} // namespace mlx_fused_attn
