// The quantized-K/V half of the GPU interface (gpu.h is the float
// attention's). Exactly one implementation is compiled into a build: a GPU
// backend with the QuantizedAttention family builds its own in place of
// backend/no_gpu_quantized.cpp.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/plan/quantized_attention_plan.h"

namespace mlx_fused_attn::gpu {

/// Builds (or finds) the kernel a plan that has a family runs on the device
/// of `s`, before the graph exists (gpu.h's prepare).
Support quantized_prepare(
    const QuantizedAttentionPlan& plan,
    mlx::core::Stream s);

/// Runs a plan that has a family on the GPU stream `s`: inputs in
/// QuantizedInput order (quantized_call.h), as the primitive receives them;
/// outputs {out}.
void quantized_run(
    const QuantizedAttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& outputs,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::gpu
