// NeighborhoodAttention: the MLX primitive behind neighborhood_attention.
// Lazy, and transformable: gradients and forward-mode derivatives come from
// the plain-ops definition (na_fallback.h); vmap folds the mapped axis into
// the batch and stays fused (fused_primitive.h).
#pragma once

#include "mlx_fused_attn/backend/cpu/na_cpu.h"
#include "mlx_fused_attn/backend/gpu_na.h"
#include "mlx_fused_attn/fused_primitive.h"
#include "mlx_fused_attn/na_call.h"
#include "mlx_fused_attn/na_fallback.h"
#include "mlx_fused_attn/na_support.h"

namespace mlx_fused_attn {

/// The fused primitive applied to a validated call whose support check passed.
mlx::core::array fused_neighborhood(const NaCall& call);

/// Neighborhood attention as a FusedPrimitive family.
struct NeighborhoodFamily {
  using Spec = NaSpec;
  using Call = NaCall;
  static constexpr const char* kName = "NeighborhoodAttention";
  static constexpr auto eval_cpu = &cpu::neighborhood;
  static constexpr auto eval_gpu = &gpu::na_eval;
  static constexpr auto plain = &neighborhood_fallback;
  static constexpr auto support = &neighborhood_support;
  static constexpr auto fused = &fused_neighborhood;
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
