// FusedAttention: the MLX primitive behind the op (fused_primitive.h). It
// carries the call's launch plan. When gradients may be taken it has a
// second output, the row log-sum-exp (backward_params.h), hidden unless the
// op's return_lse asked for it, and its vjp is the fused backward
// (backward_primitive.h; the LSE's own cotangent, where the LSE is
// returned, through lse_gradient.h); otherwise gradients
// and forward-mode derivatives come from the plain-ops definition
// (fallback.h). vmap folds the mapped axis into the batch and stays fused.
#pragma once

#include "mlx_fused_attn/plan/attention_plan.h"
#include "mlx_fused_attn/backend/cpu/attention_cpu.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/plan/call.h"
#include "mlx_fused_attn/op/call_plans.h"
#include "mlx_fused_attn/op/fallback.h"
#include "mlx_fused_attn/op/fused_primitive.h"

namespace mlx_fused_attn {

/// The fused primitive applied to a validated call whose plan has a family:
/// its output (the LSE, where it is saved, is the output's sibling). Where
/// the plan's kernel reads a mask's visit list, it is built from the call's
/// mask (what a vmap's folded call has), or taken from `user_mask`, the op's
/// mask before its broadcast, which the cache knows across calls.
mlx::core::array fused_attention(
    const AttentionCall& call,
    const AttentionPlan& plan,
    const mlx::core::array* user_mask);
/// The fused primitive's two outputs {out, lse} for a call whose plan saves
/// the LSE (the op's return_lse): the LSE is the user's, and its cotangent
/// reaches q, k, the sinks and an additive mask.
std::vector<mlx::core::array> fused_attention_with_lse(
    const AttentionCall& call,
    const AttentionPlan& plan,
    const mlx::core::array* user_mask);
inline mlx::core::array fused_attention_of_call(
    const AttentionCall& call,
    const AttentionPlan& plan) {
  return fused_attention(call, plan, nullptr);
}

/// Attention as a FusedPrimitive family.
struct AttentionFamily {
  using Spec = AttentionSpec;
  using Call = AttentionCall;
  using Plan = AttentionPlan;
  static constexpr const char* kName = "FusedAttention";
  static constexpr auto plan = &plan_attention;
  static constexpr auto fused = &fused_attention_of_call;
  static constexpr auto eval_cpu = &cpu::run;
  static constexpr auto eval_gpu = &gpu::run;
  static constexpr auto plain = &attention_fallback;
  static constexpr auto output_shape = &mlx_fused_attn::output_shape;
  /// Sinks [H_q] have no batch axis.
  static bool batched(const Spec& spec, int input) {
    return input != sinks_index(spec);
  }
  static bool equivalent(const Spec& a, const Spec& b) {
    return a.scale == b.scale && a.mask == b.mask &&
        a.has_sinks == b.has_sinks && a.force_fused == b.force_fused;
  }
};

class FusedAttention : public FusedPrimitive<AttentionFamily> {
 public:
  FusedAttention(
      mlx::core::Stream stream,
      AttentionPlan plan,
      const std::vector<mlx::core::array>& inputs,
      bool saves_lse,
      bool returns_lse = false);

  std::vector<mlx::core::array> vjp(
      const std::vector<mlx::core::array>& primals,
      const std::vector<mlx::core::array>& cotangents,
      const std::vector<int>& argnums,
      const std::vector<mlx::core::array>& outputs) override;
  std::vector<mlx::core::Shape> output_shapes(
      const std::vector<mlx::core::array>& inputs) override;
  bool is_equivalent(const mlx::core::Primitive& other) const override;

 protected:
  Definitions definitions() override;
  std::vector<mlx::core::array> apply_to(
      const std::vector<mlx::core::array>& inputs) override;

 private:
  bool saves_lse_;
  /// The LSE is an output the user holds, so its cotangent may be nonzero.
  bool returns_lse_;
};

} // namespace mlx_fused_attn
