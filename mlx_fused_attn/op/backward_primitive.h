// FusedAttentionVJP: the fused backward of FusedAttention (FlashAttention-2's
// structure, one kernel per backend). From q, k, v, the forward's output O
// and row log-sum-exp, and dO, it computes dQ, dK and dV without the
// L_q x L_k scores. Its own derivatives and vmap come from its plain-ops
// definition (the vjp of attention_fallback).
#pragma once

#include <vector>

#include "mlx/primitives.h"
#include "mlx_fused_attn/plan/attention_plan.h"
#include "mlx_fused_attn/op/transforms.h"

namespace mlx_fused_attn {

class FusedAttentionVJP : public mlx::core::Primitive {
 public:
  FusedAttentionVJP(mlx::core::Stream stream, AttentionPlan plan);

  /// inputs {q, k, v, o, lse, dO[, mask][, sinks]} (BackwardInput, call.h),
  /// outputs {dq, dk, dv}.
  void eval_cpu(
      const std::vector<mlx::core::array>& inputs,
      std::vector<mlx::core::array>& outputs) override;
  void eval_gpu(
      const std::vector<mlx::core::array>& inputs,
      std::vector<mlx::core::array>& outputs) override;

  std::vector<mlx::core::array> vjp(
      const std::vector<mlx::core::array>& primals,
      const std::vector<mlx::core::array>& cotangents,
      const std::vector<int>& argnums,
      const std::vector<mlx::core::array>& outputs) override;
  std::vector<mlx::core::array> jvp(
      const std::vector<mlx::core::array>& primals,
      const std::vector<mlx::core::array>& tangents,
      const std::vector<int>& argnums) override;
  std::pair<std::vector<mlx::core::array>, std::vector<int>> vmap(
      const std::vector<mlx::core::array>& inputs,
      const std::vector<int>& axes) override;

  std::vector<mlx::core::Shape> output_shapes(
      const std::vector<mlx::core::array>& inputs) override;
  bool is_equivalent(const mlx::core::Primitive& other) const override;
  const char* name() const override {
    return "FusedAttentionVJP";
  }

 private:
  /// dq, dk, dv as plain ops of the inputs.
  Definitions definitions();
  /// The plan made with the vjp; or, where a shapeless compile runs it on
  /// other shapes, one made for those.
  AttentionPlan plan_for(const std::vector<mlx::core::array>& inputs);

  AttentionPlan plan_;
};

/// FusedAttention's vjp where the forward saved its LSE: dq, dk, dv from
/// FusedAttentionVJP; the sinks' gradient as O(B H L) plain ops of the LSE;
/// a bool mask's gradient zero; an additive mask's, which is the L_q x L_k
/// score gradient itself, from the plain-ops vjp. `primals` are the
/// forward's inputs {q, k, v[, mask][, sinks]}; `out` and `lse` its outputs;
/// `cotangent` that of `out`.
std::vector<mlx::core::array> attention_vjp(
    const AttentionSpec& spec,
    const std::vector<mlx::core::array>& primals,
    const mlx::core::array& out,
    const mlx::core::array& lse,
    const mlx::core::array& cotangent,
    const std::vector<int>& argnums,
    mlx::core::Stream s);

} // namespace mlx_fused_attn
