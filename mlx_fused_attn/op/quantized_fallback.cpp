#include "mlx_fused_attn/op/quantized_fallback.h"

#include <stdexcept>

#include "mlx/ops.h"
#include "mlx/transforms.h"
#include "mlx_fused_attn/op/fallback.h"

namespace mlx_fused_attn {

using namespace mlx::core;

array quantized_attention_fallback(
    const QuantizedAttentionSpec& spec,
    const std::vector<array>& inputs,
    Stream s) {
  const auto dequantized = [&](int words) {
    return dequantize(
        inputs[words], inputs[words + 1], inputs[words + 2],
        spec.kv.group_size, spec.kv.bits, "affine", std::nullopt,
        inputs[kQuantQ].dtype(), s);
  };
  // The float op's inputs: q, k, v, then the mask and sinks as they are.
  std::vector<array> attention_inputs = {
      inputs[kQuantQ], dequantized(kQuantKWords), dequantized(kQuantVWords)};
  attention_inputs.insert(
      attention_inputs.end(), inputs.begin() + kQuantFixedInputs,
      inputs.end());
  return attention_fallback(spec.attention, attention_inputs, s);
}

std::string no_gradient_message() {
  return "[quantized_scaled_dot_product_attention] has no gradients: a "
         "quantized K/V cache is for inference only. Differentiate "
         "scaled_dot_product_attention over float K and V instead.";
}

array quantized_attention_without_gradients(
    const QuantizedAttentionSpec& spec,
    const std::vector<array>& inputs,
    Stream s) {
  auto forward = [spec, s](const std::vector<array>& in) {
    return std::vector<array>{quantized_attention_fallback(spec, in, s)};
  };
  auto no_vjp = [](const std::vector<array>&,
                   const std::vector<array>&,
                   const std::vector<array>&) -> std::vector<array> {
    throw std::invalid_argument(no_gradient_message());
  };
  auto no_jvp = [](const std::vector<array>&,
                   const std::vector<array>&,
                   const std::vector<int>&) -> std::vector<array> {
    throw std::invalid_argument(no_gradient_message());
  };
  return custom_function(forward, no_vjp, no_jvp)(inputs)[0];
}

} // namespace mlx_fused_attn
