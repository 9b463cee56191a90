// FusedQuantizedAttention: the MLX primitive behind
// quantized_scaled_dot_product_attention (fused_primitive.h). It carries the
// call's launch plan; vmap folds the mapped axis into the batch and stays
// fused. It has no derivatives: a quantized K/V cache is for inference, and
// vjp and jvp raise.
#pragma once

#include "mlx_fused_attn/backend/cpu/quantized_attention_cpu.h"
#include "mlx_fused_attn/backend/gpu_quantized.h"
#include "mlx_fused_attn/op/call_plans.h"
#include "mlx_fused_attn/op/fused_primitive.h"
#include "mlx_fused_attn/op/quantized_fallback.h"
#include "mlx_fused_attn/plan/quantized_call.h"

namespace mlx_fused_attn {

/// The fused primitive applied to a validated call whose plan has a family.
mlx::core::array fused_quantized_attention(
    const QuantizedAttentionCall& call,
    const QuantizedAttentionPlan& plan);

/// Attention over a quantized K/V cache as a FusedPrimitive family.
struct QuantizedAttentionFamily {
  using Spec = QuantizedAttentionSpec;
  using Call = QuantizedAttentionCall;
  using Plan = QuantizedAttentionPlan;
  static constexpr const char* kName = "FusedQuantizedAttention";
  static constexpr auto plan = &plan_quantized_attention;
  static constexpr auto fused = &fused_quantized_attention;
  static constexpr auto eval_cpu = &cpu::quantized_run;
  static constexpr auto eval_gpu = &gpu::quantized_run;
  static constexpr auto plain = &quantized_attention_fallback;
  static constexpr auto output_shape = &quantized_output_shape;
  /// Sinks [H_q] have no batch axis.
  static bool batched(const Spec& spec, int input) {
    return input != quantized_sinks_index(spec);
  }
  static bool equivalent(const Spec& a, const Spec& b) {
    return a.attention.scale == b.attention.scale &&
        a.attention.mask == b.attention.mask &&
        a.attention.has_sinks == b.attention.has_sinks &&
        a.kv.bits == b.kv.bits && a.kv.group_size == b.kv.group_size;
  }
};

class FusedQuantizedAttention
    : public FusedPrimitive<QuantizedAttentionFamily> {
 public:
  using FusedPrimitive::FusedPrimitive;

  std::vector<mlx::core::array> vjp(
      const std::vector<mlx::core::array>& primals,
      const std::vector<mlx::core::array>& cotangents,
      const std::vector<int>& argnums,
      const std::vector<mlx::core::array>& outputs) override;
  std::vector<mlx::core::array> jvp(
      const std::vector<mlx::core::array>& primals,
      const std::vector<mlx::core::array>& tangents,
      const std::vector<int>& argnums) override;
};

} // namespace mlx_fused_attn
