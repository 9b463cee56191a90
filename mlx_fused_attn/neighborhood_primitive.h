// NeighborhoodAttention: the MLX primitive behind neighborhood_attention.
// Gradients, forward-mode derivatives and vmap come from the plain-ops
// definition (explicit neighborhood mask).
#pragma once

#include "mlx/primitives.h"
#include "mlx_fused_attn/na_call.h"
#include "mlx_fused_attn/transforms.h"

namespace mlx_fused_attn {

class NeighborhoodAttention : public mlx::core::Primitive {
 public:
  NeighborhoodAttention(mlx::core::Stream stream, NaSpec spec)
      : mlx::core::Primitive(stream), spec_(spec) {}

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
    return "NeighborhoodAttention";
  }

 private:
  Definition definition();
  NaSpec spec_;
};

} // namespace mlx_fused_attn
