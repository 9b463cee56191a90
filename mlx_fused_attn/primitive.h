// FusedAttention: the MLX primitive behind the op. Lazy, and transformable:
// gradients and forward-mode derivatives come from the plain-ops definition
// (fallback.h); vmap folds the mapped axis into the batch and stays fused.
// It carries the call's launch plan, made when the op was built.
#pragma once

#include "mlx/primitives.h"
#include "mlx_fused_attn/attention_plan.h"
#include "mlx_fused_attn/call.h"
#include "mlx_fused_attn/transforms.h"

namespace mlx_fused_attn {

class FusedAttention : public mlx::core::Primitive {
 public:
  FusedAttention(mlx::core::Stream stream, AttentionPlan plan)
      : mlx::core::Primitive(stream), plan_(std::move(plan)) {}

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
    return "FusedAttention";
  }

 private:
  /// The plain-ops definition that transforms are taken through.
  Definition definition();

  /// The plan made when the op was built; or, where a shapeless compile
  /// runs the primitive on other shapes, one made for those.
  AttentionPlan plan_for(const std::vector<mlx::core::array>& inputs);

  AttentionPlan plan_;
};

/// The fused primitive applied to a validated call whose plan has a family.
mlx::core::array fused_attention(
    const AttentionCall& call,
    const AttentionPlan& plan);

} // namespace mlx_fused_attn
