#include "mlx_fused_attn/primitive.h"

namespace mlx_fused_attn {

using namespace mlx::core;

array fused_attention(const AttentionCall& call, const AttentionPlan& plan) {
  return array(
      output_shape(call.inputs),
      call.inputs[0].dtype(),
      std::make_shared<FusedAttention>(call.stream, plan, call.inputs),
      call.inputs);
}

} // namespace mlx_fused_attn
