#include "mlx_fused_attn/op/primitive.h"

#include "mlx/ops.h"
#include "mlx_fused_attn/op/backward_primitive.h"
#include "mlx_fused_attn/op/lse_gradient.h"
#include "mlx_fused_attn/op/mask_block_lists.h"
#include "mlx_fused_attn/notices.h"
#include "mlx_fused_attn/op/errors.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

// Whether gradients may be taken of a call on `inputs`. MLX asks
// detail::in_grad_tracing(), which libmlx does not export (an inline read
// of a hidden counter); array::is_tracer() is exported, and true for arrays
// made under any transform's trace (grad, vjp, jvp, vmap, compile). So a
// traced call saves its LSE, one fp32 a query row, and an untraced call,
// all inference, costs nothing.
bool may_take_gradients(const std::vector<array>& inputs) {
  for (const array& x : inputs) {
    if (x.is_tracer()) {
      return true;
    }
  }
  return false;
}

Shape lse_shape(const std::vector<array>& inputs) {
  const array& q = inputs[0];
  return {q.shape(0), q.shape(1), q.shape(2)};
}

constexpr const char* kBackwardOp = "the backward of scaled_dot_product_attention";

/// Why `call`'s fused backward cannot run, empty where it can: the
/// backward's kernels and the forward that writes the LSE they read, each
/// planned (on Metal, its pipelines built), that forward's plan kept in
/// `lse_forward`.
std::string backward_refusal(
    const AttentionCall& call,
    AttentionPlan& lse_forward) {
  const AttentionPlan backward = plan_attention_backward(call);
  if (!backward.fused()) {
    return backward.reason;
  }
  AttentionCall lse_call = call;
  lse_call.spec.saves_lse = true;
  lse_forward = plan_attention(lse_call);
  return lse_forward.fused() ? "" : lse_forward.reason;
}

/// The forward plan of a call gradients may be taken of, with `saves_lse`
/// set where the fused backward runs, planned here, before the graph
/// exists, so that a kernel that cannot run leaves plain-op gradients with
/// its reason instead of failing in eval. A forced call raises that reason
/// only when a gradient is taken (FusedAttention::vjp): a compiled or
/// vmapped inference call traces its inputs too.
AttentionPlan training_plan(
    const AttentionCall& call,
    const AttentionPlan& plan,
    bool& saves_lse) {
  AttentionPlan forward;
  const std::string reason = backward_refusal(call, forward);
  saves_lse = reason.empty();
  if (saves_lse) {
    return forward;
  }
  note_fallback(kBackwardOp, call.stream.device, reason);
  return plan;
}

/// The primitive's inputs for `call` run by `plan`: the call's own (a
/// vmap's folded call still carries the visit list of the unfolded one),
/// then the visit list where the plan's kernel reads one.
std::vector<array> primitive_inputs(
    const AttentionCall& call,
    const AttentionPlan& plan,
    const array* user_mask) {
  const int n_call = call_input_count(call.spec);
  std::vector<array> inputs(
      call.inputs.begin(), call.inputs.begin() + n_call);
  if (plan.visits_input >= 0) {
    const auto& tiles = std::get<fa::AttnTiles>(plan.tiles);
    const array& mask = user_mask ? *user_mask : inputs[mask_index(call.spec)];
    // The plan's L_q: packed GQA's rows are the heads of one query, whose
    // mask row they share (AttentionSpec::mask_shared_by_heads).
    const VisitGrid grid = {
        call.spec.mask, inputs[0].dtype(), plan.params.L_q,
        inputs[1].shape(2), tiles.bq, tiles.bk};
    inputs.push_back(cached_mask_visits(mask, grid, call.stream));
  }
  return inputs;
}

} // namespace

array fused_attention(
    const AttentionCall& call,
    const AttentionPlan& plan,
    const array* user_mask) {
  const std::vector<array> call_inputs(
      call.inputs.begin(),
      call.inputs.begin() + call_input_count(call.spec));
  bool saves_lse = false;
  const AttentionPlan forward = may_take_gradients(call_inputs)
      ? training_plan(call, plan, saves_lse)
      : plan;
  const std::vector<array> inputs =
      primitive_inputs(call, forward, user_mask);
  auto primitive = std::make_shared<FusedAttention>(
      call.stream, forward, inputs, saves_lse);
  const Dtype dt = inputs[0].dtype();
  if (!saves_lse) {
    return array(output_shape(inputs), dt, primitive, inputs);
  }
  return array::make_arrays(
      {output_shape(inputs), lse_shape(inputs)}, {dt, float32},
      primitive, inputs)[0];
}

std::vector<array> fused_attention_with_lse(
    const AttentionCall& call,
    const AttentionPlan& plan,
    const array* user_mask) {
  const std::vector<array> inputs = primitive_inputs(call, plan, user_mask);
  auto primitive = std::make_shared<FusedAttention>(
      call.stream, plan, inputs, /* saves_lse = */ true,
      /* returns_lse = */ true);
  return array::make_arrays(
      {output_shape(inputs), lse_shape(inputs)}, {inputs[0].dtype(), float32},
      primitive, inputs);
}

FusedAttention::FusedAttention(
    Stream stream,
    AttentionPlan plan,
    const std::vector<array>& inputs,
    bool saves_lse,
    bool returns_lse)
    : FusedPrimitive(stream, std::move(plan), inputs),
      saves_lse_(saves_lse),
      returns_lse_(returns_lse) {}

std::vector<array> FusedAttention::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>& outputs) {
  if (!saves_lse_) {
    if (plan().spec.force_fused) {
      const std::vector<array> call_inputs(
          primals.begin(), primals.begin() + call_input_count(plan().spec));
      AttentionPlan lse_forward;
      std::string reason =
          backward_refusal({plan().spec, call_inputs, stream()}, lse_forward);
      if (reason.empty()) {
        reason = "the forward's inputs were not traced for gradients, so it "
                 "saved no LSE for the fused backward";
      }
      throw std::invalid_argument(op_message(
          kBackwardOp, "force_fused=True but no fused backward runs: ",
          reason));
    }
    return FusedPrimitive::vjp(primals, cotangents, argnums, outputs);
  }
  std::vector<array> grads = attention_vjp(
      plan().spec, primals, outputs[0], outputs[1], cotangents[0], argnums,
      stream());
  if (!returns_lse_) {
    // A hidden LSE is read only by FusedAttentionVJP, whose definition does
    // not depend on it, so its cotangent is zero.
    return grads;
  }
  const std::vector<array> lse_grads = lse_vjp(
      plan().spec, primals, outputs[1], cotangents[1], argnums, stream());
  for (size_t i = 0; i < grads.size(); ++i) {
    grads[i] = add(grads[i], lse_grads[i], stream());
  }
  return grads;
}

std::vector<Shape> FusedAttention::output_shapes(
    const std::vector<array>& inputs) {
  std::vector<Shape> shapes = FusedPrimitive::output_shapes(inputs);
  if (saves_lse_) {
    shapes.push_back(lse_shape(inputs));
  }
  return shapes;
}

bool FusedAttention::is_equivalent(const Primitive& other) const {
  const auto& o = static_cast<const FusedAttention&>(other);
  return FusedPrimitive::is_equivalent(other) && saves_lse_ == o.saves_lse_ &&
      returns_lse_ == o.returns_lse_;
}

Definitions FusedAttention::definitions() {
  if (!saves_lse_) {
    return FusedPrimitive::definitions();
  }
  return [spec = plan().spec, s = stream()](const std::vector<array>& in) {
    return std::vector<array>{
        attention_fallback(spec, in, s), attention_lse_fallback(spec, in, s)};
  };
}

std::vector<array> FusedAttention::apply_to(
    const std::vector<array>& inputs) {
  if (!saves_lse_) {
    return FusedPrimitive::apply_to(inputs);
  }
  AttentionCall call{plan().spec, inputs, stream()};
  if (returns_lse_) {
    const AttentionPlan plan = plan_attention(call);
    return plan.fused() ? fused_attention_with_lse(call, plan, nullptr)
                        : definitions()(inputs);
  }
  // The call as the user made it: fused_attention decides whether it saves
  // the LSE, so that its plan and its outputs agree.
  call.spec.saves_lse = false;
  const AttentionPlan plan = plan_attention(call);
  if (plan.fused()) {
    const array out = fused_attention(call, plan, nullptr);
    if (!out.siblings().empty()) {
      return out.outputs();
    }
    return {out, attention_lse_fallback(call.spec, inputs, stream())};
  }
  return definitions()(inputs);
}

} // namespace mlx_fused_attn
