// What the attention planners (float K/V: attention_planner.cpp; quantized
// K/V: quantized_attention_planner.cpp) read of a call before any family
// takes it: the kernels' shapes, scale and mask features; and the refusals
// that every planner, the neighborhood one too, makes first (empty inputs,
// element types without kernels). Pure: no backend is reached from here.
#pragma once

#include <string>
#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/spec.h"
#include "mlx_fused_attn/tile/platform.h"

namespace mlx_fused_attn {

/// The shapes, scale and causal offset (`params`) and mask features
/// (`features`) of a call of `spec` with queries of shape `q` [B, H_q, L_q,
/// D] over keys of shape `k` [B, H_kv, L_k, ...] and values of D_v
/// elements a row.
void plan_shapes(
    const AttentionSpec& spec,
    const mlx::core::Shape& q,
    const mlx::core::Shape& k,
    int D_v,
    fa::AttnParams& params,
    fa::AttnFeatures& features);

/// No where any of `inputs` is empty: empty calls run as plain MLX ops.
Support no_empty_input(const std::vector<mlx::core::array>& inputs);

/// Whether the CPU kernels take `dtype`, their one limit; on yes, `kernel`
/// is their element type.
Support cpu_kernels_take(mlx::core::Dtype dtype, fa::DType& kernel);

/// Whether the GPU kernels take `dtype`, each "no" naming `op`; on yes,
/// `kernel` is their element type.
Support gpu_kernels_take(
    const std::string& op,
    mlx::core::Dtype dtype,
    fa::DType& kernel);

} // namespace mlx_fused_attn
