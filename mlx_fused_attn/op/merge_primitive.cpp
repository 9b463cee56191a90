#include "mlx_fused_attn/op/merge_primitive.h"

#include <cmath>
#include <stdexcept>

#include "mlx/compile.h"
#include "mlx/ops.h"
#include "mlx_fused_attn/backend/cpu/attention_cpu.h"

namespace mlx_fused_attn {

using namespace mlx::core;

FusedAttentionMerge::FusedAttentionMerge(
    Stream stream,
    AttentionPlan plan,
    std::shared_ptr<MergedLseSlot> slot)
    : CpuPrimitive(stream, "FusedAttentionMerge"),
      plan_(std::move(plan)),
      slot_(std::move(slot)) {}

void FusedAttentionMerge::eval_cpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  const array& q = inputs[0];
  array lse({q.shape(0), q.shape(1), q.shape(2)}, float32, nullptr, {});
  cpu::run_merge(plan_, inputs, outputs[0], lse, stream());
  slot_->lse = lse;
}

std::vector<Shape> FusedAttentionMerge::output_shapes(
    const std::vector<array>& inputs) {
  return {inputs[inputs.size() - 2].shape()};
}

FusedAttentionMergedLse::FusedAttentionMergedLse(
    Stream stream,
    std::shared_ptr<MergedLseSlot> slot)
    : CpuPrimitive(stream, "FusedAttentionMergedLse"),
      slot_(std::move(slot)) {}

void FusedAttentionMergedLse::eval_cpu(
    const std::vector<array>&,
    std::vector<array>& outputs) {
  if (!slot_->lse) {
    throw std::logic_error(
        "[FusedAttentionMergedLse] internal error: the merge has not run");
  }
  outputs[0].copy_shared_buffer(*slot_->lse);
  slot_->lse.reset();
}

std::vector<array> fused_attention_merge(
    const AttentionPlan& plan,
    std::vector<array> call_inputs,
    const array& held_out,
    const array& held_lse,
    Stream s) {
  const array& q = call_inputs[0];
  const Shape rows = {q.shape(0), q.shape(1), q.shape(2)};
  call_inputs.push_back(held_out);
  call_inputs.push_back(held_lse);
  auto slot = std::make_shared<MergedLseSlot>();
  array out(
      held_out.shape(), held_out.dtype(),
      std::make_shared<FusedAttentionMerge>(s, plan, slot),
      std::move(call_inputs));
  array lse(
      rows, float32, std::make_shared<FusedAttentionMergedLse>(s, slot),
      {out});
  return {out, lse};
}

namespace {

std::vector<array> merged_by_lse_ops(
    const array& held_out,
    const array& held_lse,
    const array& out,
    const array& lse,
    Stream s) {
  const array top = maximum(held_lse, lse, s);
  // A row neither side saw has top = -inf: shifting by 0 keeps its
  // weights exp(-inf) = 0 instead of NaN.
  const array shift = where(isfinite(top, s), top, array(0.0f), s);
  const array w_held = exp(subtract(held_lse, shift, s), s);
  const array w_new = exp(subtract(lse, shift, s), s);
  const array total = add(w_held, w_new, s);
  const array seen = greater(total, array(0.0f), s);
  const array safe = where(seen, total, array(1.0f), s);
  // An output whose row saw no key may hold anything (NaN): zero weight
  // times NaN is NaN, so it is left out instead.
  const auto term = [&](const array& w, const array& o, const array& l) {
    const array o32 = where(
        expand_dims(isfinite(l, s), -1, s), astype(o, float32, s),
        array(0.0f), s);
    return multiply(expand_dims(w, -1, s), o32, s);
  };
  const array sum = add(
      term(w_held, held_out, held_lse), term(w_new, out, lse), s);
  const array merged = divide(sum, expand_dims(safe, -1, s), s);
  return {
      astype(merged, held_out.dtype(), s),
      where(seen, add(shift, log(safe, s), s), array(-INFINITY), s)};
}

/// What mlx::core::compile traces: a captureless function, so its ops
/// run on the default stream, which merged_by_lse checks the call's is.
std::vector<array> merged_on_default_stream(const std::vector<array>& in) {
  return merged_by_lse_ops(
      in[0], in[1], in[2], in[3], default_stream(default_device()));
}

} // namespace

std::vector<array> merged_by_lse(
    const array& held_out,
    const array& held_lse,
    const array& out,
    const array& lse,
    Stream s) {
  if (s.device == default_device() && s == default_stream(s.device)) {
    return compile(merged_on_default_stream)({held_out, held_lse, out, lse});
  }
  return merged_by_lse_ops(held_out, held_lse, out, lse, s);
}

} // namespace mlx_fused_attn
