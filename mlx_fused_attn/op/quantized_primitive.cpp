#include "mlx_fused_attn/op/quantized_primitive.h"

#include <stdexcept>

namespace mlx_fused_attn {

using namespace mlx::core;

array fused_quantized_attention(
    const QuantizedAttentionCall& call,
    const QuantizedAttentionPlan& plan) {
  return array(
      quantized_output_shape(call.inputs),
      call.inputs[kQuantQ].dtype(),
      std::make_shared<FusedQuantizedAttention>(call.stream, plan, call.inputs),
      call.inputs);
}

std::vector<array> FusedQuantizedAttention::vjp(
    const std::vector<array>&,
    const std::vector<array>&,
    const std::vector<int>&,
    const std::vector<array>&) {
  throw std::invalid_argument(no_gradient_message());
}

std::vector<array> FusedQuantizedAttention::jvp(
    const std::vector<array>&,
    const std::vector<array>&,
    const std::vector<int>&) {
  throw std::invalid_argument(no_gradient_message());
}

} // namespace mlx_fused_attn
