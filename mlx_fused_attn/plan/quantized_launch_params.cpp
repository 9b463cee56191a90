#include "mlx_fused_attn/plan/quantized_launch_params.h"

#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

fa::QuantKvOperand operand(const std::vector<array>& inputs, int words) {
  const array& w = inputs[words];
  const array& s = inputs[words + 1];
  const array& b = inputs[words + 2];
  fa::QuantKvOperand op{};
  for (int i = 0; i < 3; ++i) {
    op.word_strides[i] = w.strides()[i];
    op.scale_strides[i] = s.strides()[i];
    op.bias_strides[i] = b.strides()[i];
  }
  op.scale_group_stride = s.strides()[3];
  op.bias_group_stride = b.strides()[3];
  return op;
}

} // namespace

fa::AttnParams quantized_attention_params(
    const QuantizedAttentionPlan& plan,
    const std::vector<array>& inputs,
    const array& out) {
  fa::AttnParams p = plan.params;
  const array& q = inputs[kQuantQ];
  for (int i = 0; i < 3; ++i) {
    p.q_strides[i] = q.strides()[i];
    p.o_strides[i] = out.strides()[i];
  }
  const int mi = quantized_mask_index(plan.spec);
  if (mi >= 0) {
    for (int i = 0; i < 4; ++i) {
      p.mask_strides[i] = inputs[mi].strides()[i];
    }
  }
  if (plan.packed_gqa) {
    pack_gqa_strides(p);
  }
  return p;
}

fa::QuantKvParams quantized_kv_params(
    const QuantizedAttentionPlan& plan,
    const std::vector<array>& inputs) {
  fa::QuantKvParams p{};
  p.bits = plan.spec.kv.bits;
  p.group_size = plan.spec.kv.group_size;
  p.k = operand(inputs, kQuantKWords);
  p.v = operand(inputs, kQuantVWords);
  return p;
}

} // namespace mlx_fused_attn
