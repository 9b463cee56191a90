#include "mlx_fused_attn/op/attention.h"

#include "mlx/ops.h"
#include "mlx_fused_attn/plan/attention_planner.h"
#include "mlx_fused_attn/op/call_plans.h"
#include "mlx_fused_attn/op/errors.h"
#include "mlx_fused_attn/op/fallback.h"
#include "mlx_fused_attn/op/mask_and_sinks.h"
#include "mlx_fused_attn/op/backward_primitive.h"
#include "mlx_fused_attn/op/merge_primitive.h"
#include "mlx_fused_attn/op/primitive.h"
#include "mlx_fused_attn/op/runs_fused.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr const char* kDtypeOf = "q, k, v";

template <typename... Parts>
std::string message(const Parts&... parts) {
  return op_message(kOp, parts...);
}

bool is_float(Dtype t) {
  return issubdtype(t, floating);
}

/// Checks q, k and v against mx.fast's rules; returns the dtype they run
/// in, their promoted type.
Dtype check_qkv(const array& q, const array& k, const array& v) {
  const char* names[] = {"q", "k", "v"};
  const array* qkv[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    if (qkv[i]->ndim() != 4) {
      throw std::invalid_argument(message(
          names[i], " must have rank 4 [B, H, L, D]; got shape ",
          qkv[i]->shape()));
    }
  }
  // Like mx.fast, only the promoted type must be floating (an integer q with
  // float16 k, v runs in float16), and a bad dtype is a ValueError there too.
  const Dtype dt = promote_types(promote_types(q.dtype(), k.dtype()), v.dtype());
  if (!is_float(dt)) {
    throw std::invalid_argument(message(
        "q, k, v must promote to a floating-point type (float16, bfloat16, "
        "float32); got ", q.dtype(), ", ", k.dtype(), ", ", v.dtype(),
        " (promoted: ", dt, ")"));
  }
  if (k.shape(0) != q.shape(0) || v.shape(0) != q.shape(0)) {
    throw std::invalid_argument(message(
        "q, k, v must have the same batch size; got shapes ", q.shape(), ", ",
        k.shape(), ", ", v.shape()));
  }
  if (k.shape(3) != q.shape(3)) {
    throw std::invalid_argument(message(
        "k must have the head dim of q (", q.shape(3), "); got k of shape ",
        k.shape()));
  }
  if (v.shape(1) != k.shape(1) || v.shape(2) != k.shape(2)) {
    throw std::invalid_argument(message(
        "v must have the heads and length of k ", k.shape(),
        "; got v of shape ", v.shape()));
  }
  check_gqa_heads(kOp, q.shape(1), k.shape(1));
  return dt;
}

// Mirrors mx.fast.scaled_dot_product_attention's argument rules, with error
// messages that name the argument and what it accepts.
AttentionCall validate(
    const array& q,
    const array& k,
    const array& v,
    float scale,
    const Mask& mask,
    const std::optional<array>& sinks,
    StreamOrDevice sd,
    const PlanHint& hint = {}) {
  const Dtype dt = check_qkv(q, k, v);
  check_scale(kOp, scale);

  Stream s = to_stream(sd);
  AttentionSpec spec{scale, MaskKind::None, sinks.has_value()};
  spec.hint = hint;
  std::vector<array> inputs = {
      astype(q, dt, s), astype(k, dt, s), astype(v, dt, s)};

  const Shape full = {q.shape(0), q.shape(1), q.shape(2), k.shape(2)};
  add_mask(kOp, kDtypeOf, mask, full, dt, spec, inputs, s);
  if (sinks) {
    inputs.push_back(checked_sinks(kOp, kDtypeOf, *sinks, q.shape(1), dt, s));
  }
  return {spec, std::move(inputs), s};
}

} // namespace

array scaled_dot_product_attention(
    const array& q,
    const array& k,
    const array& v,
    float scale,
    const Mask& mask,
    const std::optional<array>& sinks,
    bool force_fused,
    StreamOrDevice s,
    const PlanHint& hint) {
  AttentionCall call = validate(q, k, v, scale, mask, sinks, s, hint);
  call.spec.force_fused = force_fused;
  const AttentionPlan plan = plan_attention(call);
  if (runs_fused(kOp, plan, force_fused, call.stream.device)) {
    return fused_attention(call, plan, std::get_if<array>(&mask));
  }
  return attention_fallback(call.spec, call.inputs, call.stream);
}

std::pair<array, array> scaled_dot_product_attention_with_lse(
    const array& q,
    const array& k,
    const array& v,
    float scale,
    const Mask& mask,
    const std::optional<array>& sinks,
    bool force_fused,
    StreamOrDevice s) {
  AttentionCall call = validate(q, k, v, scale, mask, sinks, s);
  call.spec.saves_lse = true;
  call.spec.force_fused = force_fused;
  const AttentionPlan plan = plan_attention(call);
  if (runs_fused(kOp, plan, force_fused, call.stream.device)) {
    const std::vector<array> outs =
        fused_attention_with_lse(call, plan, std::get_if<array>(&mask));
    return {outs[0], outs[1]};
  }
  return {
      attention_fallback(call.spec, call.inputs, call.stream),
      attention_lse_fallback(call.spec, call.inputs, call.stream)};
}

namespace {

/// A per-row statistic (an LSE) the caller passes: one value a query row.
void check_row_stats(const char* name, const array& a, const Shape& rows) {
  if (a.shape() != rows) {
    throw std::invalid_argument(message(
        name, " must have shape ", rows, " [B, H_q, L_q]; got ", a.shape()));
  }
}

} // namespace

std::vector<array> attention_backward(
    const array& q,
    const array& k,
    const array& v,
    const array& out,
    const array& lse,
    const array& dout,
    float scale,
    const Mask& mask,
    StreamOrDevice s) {
  AttentionCall call = validate(q, k, v, scale, mask, std::nullopt, s);
  // Planned as a training call's backward, whose forward saved the LSE.
  call.spec.saves_lse = true;
  const Shape out_shape = output_shape(call.inputs);
  const Shape rows = {q.shape(0), q.shape(1), q.shape(2)};
  if (out.shape() != out_shape || dout.shape() != out_shape) {
    throw std::invalid_argument(message(
        "out and dout must have the output's shape ", out_shape, "; got ",
        out.shape(), " and ", dout.shape()));
  }
  check_row_stats("lse", lse, rows);
  const Dtype dt = call.inputs[0].dtype();
  // The kernels read a contiguous fp32 LSE (backward_params.h).
  const array lse32 = contiguous(astype(lse, float32, call.stream), false,
                                 call.stream);
  return attention_vjp(
      call.spec, call.inputs, astype(out, dt, call.stream), lse32, dout,
      {0, 1, 2}, call.stream);
}

std::pair<array, array> attention_merge(
    const array& q,
    const array& k,
    const array& v,
    const array& held_out,
    const array& held_lse,
    float scale,
    const Mask& mask,
    StreamOrDevice s) {
  AttentionCall call = validate(q, k, v, scale, mask, std::nullopt, s);
  call.spec.saves_lse = true;
  const Shape out_shape = output_shape(call.inputs);
  const Shape rows = {q.shape(0), q.shape(1), q.shape(2)};
  const Dtype dt = call.inputs[0].dtype();
  if (held_out.shape() != out_shape || held_out.dtype() != dt) {
    throw std::invalid_argument(message(
        "held_out must have the output's shape ", out_shape, " and dtype ",
        dt, "; got ", held_out.shape(), " ", held_out.dtype()));
  }
  check_row_stats("held_lse", held_lse, rows);
  const array lse32 = astype(held_lse, float32, call.stream);
  const AttentionPlan plan = plan_attention(call);
  // The CPU kernel merges in place; the GPU kernels' epilogues do not
  // (yet), so there the partial is merged by plain ops.
  if (plan.fused() && call.stream.device == Device::cpu) {
    const std::vector<array> merged =
        fused_attention_merge(plan, call.inputs, held_out, lse32, call.stream);
    return {merged[0], merged[1]};
  }
  const auto [out, lse] = scaled_dot_product_attention_with_lse(
      q, k, v, scale, mask, std::nullopt, false, call.stream);
  const std::vector<array> merged =
      merged_by_lse(held_out, lse32, out, lse, call.stream);
  return {merged[0], merged[1]};
}

std::pair<bool, std::string> can_use_fused(
    const array& q,
    const array& k,
    const array& v,
    float scale,
    const Mask& mask,
    const std::optional<array>& sinks,
    StreamOrDevice s,
    const PlanHint& hint) {
  const AttentionPlan plan =
      plan_attention(validate(q, k, v, scale, mask, sinks, s, hint));
  return {plan.fused(), plan.fused() ? plan_note(plan) : plan.reason};
}

PlanSummary plan_summary(
    const array& q,
    const array& k,
    const array& v,
    float scale,
    const Mask& mask,
    const std::optional<array>& sinks,
    StreamOrDevice s,
    const PlanHint& hint) {
  return summarize_plan(
      plan_attention(validate(q, k, v, scale, mask, sinks, s, hint)));
}

} // namespace mlx_fused_attn
