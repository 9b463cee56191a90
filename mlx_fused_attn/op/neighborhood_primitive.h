// NeighborhoodAttention: the MLX primitive behind neighborhood_attention
// (fused_primitive.h). It carries the call's launch plan; gradients and
// forward-mode derivatives come from the plain-ops definition
// (na_fallback.h); vmap folds the mapped axis into the batch and stays
// fused.
#pragma once

#include "mlx_fused_attn/backend/cpu/na_cpu.h"
#include "mlx_fused_attn/backend/gpu_na.h"
#include "mlx_fused_attn/op/fused_primitive.h"
#include "mlx_fused_attn/plan/na_call.h"
#include "mlx_fused_attn/op/na_fallback.h"
#include "mlx_fused_attn/op/call_plans.h"

namespace mlx_fused_attn {

/// The fused primitive applied to a validated call whose plan has a family.
mlx::core::array fused_neighborhood(const NaCall& call, const NaPlan& plan);

/// Neighborhood attention as a FusedPrimitive family.
struct NeighborhoodFamily {
  using Spec = NaSpec;
  using Call = NaCall;
  using Plan = NaPlan;
  static constexpr const char* kName = "NeighborhoodAttention";
  static constexpr auto plan = &plan_neighborhood;
  static constexpr auto fused = &fused_neighborhood;
  static void eval_cpu(
      const Plan& plan,
      const std::vector<mlx::core::array>& inputs,
      std::vector<mlx::core::array>& outputs,
      mlx::core::Stream s) {
    cpu::na_run(plan, inputs, outputs[0], s);
  }
  static void eval_gpu(
      const Plan& plan,
      const std::vector<mlx::core::array>& inputs,
      std::vector<mlx::core::array>& outputs,
      mlx::core::Stream s) {
    gpu::na_run(plan, inputs, outputs[0], s);
  }
  static constexpr auto plain = &neighborhood_fallback;
  static constexpr auto output_shape = &na_output_shape;
  /// q, k and v all have the batch as axis 0.
  static bool batched(const Spec&, int) {
    return true;
  }
  static bool equivalent(const Spec& a, const Spec& b);
};

class NeighborhoodAttention : public FusedPrimitive<NeighborhoodFamily> {
 public:
  using FusedPrimitive::FusedPrimitive;
};

} // namespace mlx_fused_attn
