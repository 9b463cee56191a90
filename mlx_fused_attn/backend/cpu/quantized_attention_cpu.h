// The fused CPU attention over a quantized K/V cache: eval_cpu of
// FusedQuantizedAttention (quantized_attention_planner.h decides which calls
// it takes).
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/plan/quantized_attention_plan.h"

namespace mlx_fused_attn::cpu {

/// Allocates {out} and schedules the kernel on the CPU stream `s`; inputs in
/// QuantizedInput order (quantized_call.h). The kernel reads every input
/// through its strides, the codes a row at a time (a row's words are
/// copied together where they are not contiguous).
void quantized_run(
    const QuantizedAttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& outputs,
    mlx::core::Stream s);

} // namespace mlx_fused_attn::cpu
