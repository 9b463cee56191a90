#include "mlx_fused_attn/primitive.h"

#include "mlx/ops.h"
#include "mlx/transforms.h"
#include "mlx_fused_attn/backend/cpu/attention_cpu.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/fallback.h"
#include "mlx_fused_attn/transforms.h"

namespace mlx_fused_attn {

using namespace mlx::core;

array fused_attention(const AttentionCall& call, const AttentionPlan& plan) {
  return array(
      output_shape(call.inputs),
      call.inputs[0].dtype(),
      std::make_shared<FusedAttention>(call.stream, plan),
      call.inputs);
}

AttentionPlan FusedAttention::plan_for(const std::vector<array>& inputs) {
  const fa::AttnParams& p = plan_.params;
  const Shape planned_q = {p.B, p.H_q, p.L_q, p.D};
  const Shape planned_k = {p.B, p.H_kv, p.L_k, p.D};
  if (inputs[0].shape() == planned_q && inputs[1].shape() == planned_k &&
      inputs[2].shape(3) == p.D_v) {
    return plan_;
  }
  AttentionPlan plan = plan_attention({plan_.spec, inputs, stream()});
  if (!plan.fused()) {
    throw std::invalid_argument(
        "[scaled_dot_product_attention] a shapeless compile reached shapes "
        "no fused kernel runs: " + plan.reason);
  }
  return plan;
}

void FusedAttention::eval_cpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  cpu::run(plan_for(inputs), inputs, outputs[0], stream());
}

void FusedAttention::eval_gpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  gpu::run(plan_for(inputs), inputs, outputs[0], stream());
}

std::vector<array> FusedAttention::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  return vjp_through(definition(), primals, cotangents, argnums);
}

std::vector<array> FusedAttention::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  return jvp_through(definition(), primals, tangents, argnums);
}

Definition FusedAttention::definition() {
  return [spec = plan_.spec, s = stream()](const std::vector<array>& in) {
    return attention_fallback(spec, in, s);
  };
}

std::pair<std::vector<array>, std::vector<int>> FusedAttention::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  Stream s = stream();
  int n = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) {
      n = inputs[i].shape(axes[i]);
      break;
    }
  }
  const AttentionSpec& spec = plan_.spec;
  const int sinks = sinks_index(spec);
  if (sinks >= 0 && axes[sinks] >= 0) {
    // Sinks that vary along the mapped axis cannot fold into the batch.
    auto def = definition();
    auto fun = [def](const std::vector<array>& in) {
      return std::vector<array>{def(in)};
    };
    return {mlx::core::vmap(fun, axes, {0})(inputs), {0}};
  }
  // Fold the mapped axis into the batch axis: [n, B, ...] -> [n * B, ...].
  std::vector<array> folded;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array x = inputs[i];
    if (static_cast<int>(i) == sinks) {
      folded.push_back(x);
      continue;
    }
    if (axes[i] >= 0) {
      x = moveaxis(x, axes[i], 0, s);
    } else {
      Shape shape = x.shape();
      shape.insert(shape.begin(), n);
      x = broadcast_to(expand_dims(x, 0, s), shape, s);
    }
    Shape shape(x.shape().begin() + 1, x.shape().end());
    shape[0] *= n;
    folded.push_back(reshape(x, shape, s));
  }
  // The folded call has its own shapes, so its own plan.
  const AttentionCall call{spec, folded, s};
  const AttentionPlan plan = plan_attention(call);
  array out = plan.fused() ? fused_attention(call, plan)
                           : attention_fallback(spec, folded, s);
  Shape shape = out.shape();
  shape[0] /= n;
  shape.insert(shape.begin(), n);
  return {{reshape(out, shape, s)}, {0}};
}

std::vector<Shape> FusedAttention::output_shapes(
    const std::vector<array>& inputs) {
  return {output_shape(inputs)};
}

bool FusedAttention::is_equivalent(const Primitive& other) const {
  const auto& o = static_cast<const FusedAttention&>(other);
  const AttentionSpec &a = plan_.spec, &b = o.plan_.spec;
  return a.scale == b.scale && a.mask == b.mask && a.has_sinks == b.has_sinks;
}

} // namespace mlx_fused_attn
