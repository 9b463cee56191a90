// What a backend computes from a quantized plan at eval, when the strides of
// the arrays its kernels read are known (launch_params.h does the same for
// the float plans).
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/plan/quantized_attention_plan.h"
#include "mlx_fused_attn/quantized_kv_params.h"

namespace mlx_fused_attn {

/// The plan's parameters with the strides of q, the output and the mask
/// (packed where the plan packs GQA); K's and V's are quantized_kv_params'.
fa::AttnParams quantized_attention_params(
    const QuantizedAttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    const mlx::core::array& out);

/// The codes', scales' and biases' strides of K and V among `inputs`
/// (QuantizedInput order), with the plan's code width and group size.
fa::QuantKvParams quantized_kv_params(
    const QuantizedAttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs);

} // namespace mlx_fused_attn
