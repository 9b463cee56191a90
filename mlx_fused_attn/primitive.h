// FusedAttention: the MLX primitive behind the op. Lazy, and transformable:
// gradients and forward-mode derivatives come from the plain-ops definition
// (fallback.h); vmap folds the mapped axis into the batch and stays fused
// (fused_primitive.h).
#pragma once

#include "mlx_fused_attn/backend/cpu/attention_cpu.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/call.h"
#include "mlx_fused_attn/fallback.h"
#include "mlx_fused_attn/fused_primitive.h"
#include "mlx_fused_attn/support.h"

namespace mlx_fused_attn {

/// The fused primitive applied to a validated call whose support check passed.
mlx::core::array fused_attention(const AttentionCall& call);

/// Attention as a FusedPrimitive family.
struct AttentionFamily {
  using Spec = AttentionSpec;
  using Call = AttentionCall;
  static constexpr const char* kName = "FusedAttention";
  static constexpr auto eval_cpu = &cpu::attention;
  static constexpr auto eval_gpu = &gpu::eval;
  static constexpr auto plain = &attention_fallback;
  static constexpr auto support = &fused_support;
  static constexpr auto fused = &fused_attention;
  static constexpr auto output_shape = &mlx_fused_attn::output_shape;
  /// Sinks [H_q] have no batch axis.
  static bool batched(const Spec& spec, int input) {
    return input != sinks_index(spec);
  }
  static bool equivalent(const Spec& a, const Spec& b) {
    return a.scale == b.scale && a.mask == b.mask &&
        a.has_sinks == b.has_sinks;
  }
};

class FusedAttention : public FusedPrimitive<AttentionFamily> {
 public:
  using FusedPrimitive::FusedPrimitive;
};

} // namespace mlx_fused_attn
