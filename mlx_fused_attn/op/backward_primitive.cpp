#include "mlx_fused_attn/op/backward_primitive.h"

#include <stdexcept>
#include <string>

#include "mlx/ops.h"
#include "mlx/transforms.h"
#include "mlx_fused_attn/backend/cpu/attention_cpu.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/op/call_plans.h"
#include "mlx_fused_attn/op/errors.h"
#include "mlx_fused_attn/op/fallback.h"
#include "mlx_fused_attn/plan/launch_params.h"
#include "mlx_fused_attn/op/mask_block_lists.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

/// The forward's inputs {q, k, v[, mask][, sinks]} among the backward's.
std::vector<array> forward_inputs(
    const AttentionSpec& spec,
    const std::vector<array>& inputs) {
  std::vector<array> fwd = {inputs[kBwdQ], inputs[kBwdK], inputs[kBwdV]};
  const OptionalInputs at = optional_inputs(spec, kBwdMask);
  if (at.mask >= 0) {
    fwd.push_back(inputs[at.mask]);
  }
  if (at.sinks >= 0) {
    fwd.push_back(inputs[at.sinks]);
  }
  return fwd;
}

/// dq, dk, dv of attention_fallback at `forward` for the cotangent `dout`.
std::vector<array> plain_qkv_gradients(
    const AttentionSpec& spec,
    const std::vector<array>& forward,
    const array& dout,
    Stream s) {
  auto of_qkv = [&](const std::vector<array>& qkv) {
    std::vector<array> in = forward;
    std::copy(qkv.begin(), qkv.end(), in.begin());
    return std::vector<array>{attention_fallback(spec, in, s)};
  };
  return mlx::core::vjp(
             of_qkv, {forward[0], forward[1], forward[2]}, {dout})
      .second;
}

// d sinks[h] = -sum over batches and rows of P_sink * D, where P_sink =
// exp(sinks[h] - LSE) and D = rowsum(dO * O): the sink's logit shares the
// softmax but carries no value. O(B H L) work from what the forward saved.
array sinks_gradient(
    const array& sinks,
    const array& out,
    const array& lse,
    const array& dout,
    Stream s) {
  const array d = sum(
      multiply(astype(dout, float32, s), astype(out, float32, s), s), -1,
      false, s);
  const array logit =
      reshape(astype(sinks, float32, s), {1, sinks.shape(0), 1}, s);
  const array p_sink = exp(subtract(logit, lse, s), s);
  return astype(
      negative(sum(multiply(p_sink, d, s), {0, 2}, false, s), s),
      sinks.dtype(), s);
}

} // namespace

FusedAttentionVJP::FusedAttentionVJP(Stream stream, AttentionPlan plan)
    : Primitive(stream), plan_(std::move(plan)) {}

AttentionPlan FusedAttentionVJP::plan_for(
    const std::vector<array>& inputs) {
  const fa::AttnParams& p = plan_.params;
  const Shape planned_q = {p.B, p.H_q, p.L_q, p.D};
  const Shape planned_v = {p.B, p.H_kv, p.L_k, p.D_v};
  if (inputs[kBwdQ].shape() == planned_q &&
      inputs[kBwdV].shape() == planned_v) {
    return plan_;
  }
  AttentionPlan plan = plan_attention_backward(
      {plan_.spec, forward_inputs(plan_.spec, inputs), stream()});
  if (!plan.fused()) {
    throw std::invalid_argument(
        "[FusedAttentionVJP] a shapeless compile reached shapes no fused "
        "backward runs: " +
        plan.reason);
  }
  return plan;
}

void FusedAttentionVJP::eval_cpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  cpu::run_backward(plan_for(inputs), inputs, outputs, stream());
}

void FusedAttentionVJP::eval_gpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  gpu::run_backward(plan_for(inputs), inputs, outputs, stream());
}

Definitions FusedAttentionVJP::definitions() {
  return [spec = plan_.spec, s = stream()](const std::vector<array>& in) {
    return plain_qkv_gradients(
        spec, forward_inputs(spec, in), in[kBwdDout], s);
  };
}

std::vector<array> FusedAttentionVJP::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  return vjp_through(definitions(), primals, cotangents, argnums);
}

std::vector<array> FusedAttentionVJP::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  return jvp_through(definitions(), primals, tangents, argnums);
}

std::pair<std::vector<array>, std::vector<int>> FusedAttentionVJP::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  return {mlx::core::vmap(definitions(), axes)(inputs), {0, 0, 0}};
}

std::vector<Shape> FusedAttentionVJP::output_shapes(
    const std::vector<array>& inputs) {
  return {
      inputs[kBwdQ].shape(), inputs[kBwdK].shape(), inputs[kBwdV].shape()};
}

bool FusedAttentionVJP::is_equivalent(const Primitive& other) const {
  const AttentionSpec& o =
      static_cast<const FusedAttentionVJP&>(other).plan_.spec;
  return plan_.spec.scale == o.scale && plan_.spec.mask == o.mask &&
      plan_.spec.has_sinks == o.has_sinks;
}

std::vector<array> attention_vjp(
    const AttentionSpec& spec,
    const std::vector<array>& primals,
    const array& out,
    const array& lse,
    const array& cotangent,
    const std::vector<int>& argnums,
    Stream s) {
  const Definition plain = [&](const std::vector<array>& in) {
    return attention_fallback(spec, in, s);
  };
  const AttentionPlan plan = plan_attention_backward({spec, primals, s});
  if (!plan.fused()) {
    // The forward's plan said yes; a kernel family that has failed to
    // build since (kernel_family.h) lands here.
    if (spec.force_fused) {
      throw std::invalid_argument(op_message(
          "the backward of scaled_dot_product_attention",
          "force_fused=True but no fused backward runs: ", plan.reason));
    }
    return vjp_through(plain, primals, {cotangent}, argnums);
  }
  const Dtype dt = primals[0].dtype();
  // The kernels read dO in the output's dtype; mx.vjp takes any.
  const array dout = astype(cotangent, dt, s);
  std::vector<array> inputs = {
      primals[0], primals[1], primals[2], out, lse, dout};
  const int mi = mask_index(spec), si = sinks_index(spec);
  if (mi >= 0) {
    inputs.push_back(primals[mi]);
  }
  if (si >= 0) {
    inputs.push_back(primals[si]);
  }
  if (plan.lists_input >= 0) {
    // The user's mask: the call's view broadcasts it over batch and heads.
    const array& m = primals[mi];
    const array user = slice(
        m, {0, 0, 0, 0},
        {spec.mask_shared_by_batch ? 1 : m.shape(0),
         spec.mask_shared_by_heads ? 1 : m.shape(1), m.shape(2), m.shape(3)},
        s);
    const BwdListGrid grid = backward_list_grid(plan, dt);
    // The forward's classes of the mask follow the call's inputs where its
    // kernel read them.
    const size_t vi = call_input_count(spec);
    inputs.push_back(
        primals.size() > vi
            ? cached_backward_mask_lists(primals[vi], user, grid, s)
            : backward_mask_lists(user, grid, s));
  }
  const std::vector<array> grads = array::make_arrays(
      {primals[0].shape(), primals[1].shape(), primals[2].shape()},
      {dt, dt, dt}, std::make_shared<FusedAttentionVJP>(s, plan), inputs);

  std::vector<array> result;
  for (int a : argnums) {
    if (a < 3) {
      result.push_back(grads[a]);
    } else if (a == si) {
      result.push_back(sinks_gradient(primals[si], out, lse, dout, s));
    } else if (spec.mask == MaskKind::Bool) {
      result.push_back(zeros_like(primals[a], s));
    } else {
      result.push_back(vjp_through(plain, primals, {cotangent}, {a})[0]);
    }
  }
  return result;
}

} // namespace mlx_fused_attn
