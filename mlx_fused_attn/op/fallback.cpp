#include "mlx_fused_attn/op/fallback.h"

#include <limits>

#include "mlx/ops.h"
#include "mlx/utils.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

/// The scaled, masked scores [B, H_kv, group, L_q, L_k], the sinks' logit
/// first in the last axis where there are sinks. GQA without repeating k
/// and v: q is viewed as [B, H_kv, group, L_q, D] against a broadcast group
/// axis of k.
array masked_scores(
    const AttentionSpec& spec,
    const std::vector<array>& inputs,
    Stream s) {
  const array& q_in = inputs[0];
  const int B = q_in.shape(0), H_q = q_in.shape(1), L_q = q_in.shape(2);
  const int H_kv = inputs[1].shape(1), L_k = inputs[1].shape(2);
  const int group = H_q / H_kv;
  const Dtype dt = q_in.dtype();

  array q = multiply(array(spec.scale, dt), q_in, s);
  q = reshape(q, {B, H_kv, group, L_q, q.shape(3)}, s);
  array k = expand_dims(inputs[1], 2, s);

  array scores = matmul(q, swapaxes(k, -1, -2, s), s);
  const array lowest(finfo(dt).min, dt);
  if (spec.mask == MaskKind::Causal) {
    array rows = reshape(arange(L_k - L_q, L_k, s), {L_q, 1}, s);
    array cols = reshape(arange(0, L_k, s), {1, L_k}, s);
    scores = where(greater_equal(rows, cols, s), scores, lowest, s);
  } else if (spec.mask != MaskKind::None) {
    array mask = reshape(inputs[mask_index(spec)], {B, H_kv, group, L_q, L_k}, s);
    scores = spec.mask == MaskKind::Bool ? where(mask, scores, lowest, s)
                                         : add(scores, mask, s);
  }
  if (spec.has_sinks) {
    // The sink is one more logit per head, taking mass but carrying no value.
    array sinks = reshape(inputs[sinks_index(spec)], {1, H_kv, group, 1, 1}, s);
    sinks = broadcast_to(sinks, {B, H_kv, group, L_q, 1}, s);
    scores = concatenate({sinks, scores}, -1, s);
  }
  return scores;
}

/// Whether each row [B, H_q, L_q] sees a key: false where a bool or causal
/// mask hides every key and there is no sink.
array row_sees_a_key(
    const AttentionSpec& spec,
    const std::vector<array>& inputs,
    Stream s) {
  const array& q = inputs[0];
  const Shape rows = {q.shape(0), q.shape(1), q.shape(2)};
  if (spec.has_sinks || spec.mask == MaskKind::None ||
      spec.mask == MaskKind::Additive) {
    return full(rows, array(true), s);
  }
  if (spec.mask == MaskKind::Causal) {
    const int L_q = q.shape(2), L_k = inputs[1].shape(2);
    // Row i sees key 0 iff i + L_k - L_q >= 0.
    return broadcast_to(
        greater_equal(arange(L_k - L_q, L_k, s), array(0), s), rows, s);
  }
  return any(inputs[mask_index(spec)], -1, false, s);
}

} // namespace

array attention_fallback(
    const AttentionSpec& spec,
    const std::vector<array>& inputs,
    Stream s) {
  const array& q = inputs[0];
  array probs = softmax(
      masked_scores(spec, inputs, s), std::vector<int>{-1},
      /* precise = */ true, s);
  if (spec.has_sinks) {
    probs = slice(probs, {0, 0, 0, 0, 1}, probs.shape(), s);
  }
  array out = matmul(probs, expand_dims(inputs[2], 2, s), s);
  return reshape(out, {q.shape(0), q.shape(1), q.shape(2), out.shape(4)}, s);
}

array attention_lse_fallback(
    const AttentionSpec& spec,
    const std::vector<array>& inputs,
    Stream s) {
  const array& q = inputs[0];
  array scores = astype(masked_scores(spec, inputs, s), float32, s);
  array lse = reshape(
      logsumexp(scores, -1, false, s), {q.shape(0), q.shape(1), q.shape(2)},
      s);
  const array none(-std::numeric_limits<float>::infinity(), float32);
  return where(row_sees_a_key(spec, inputs, s), lse, none, s);
}

} // namespace mlx_fused_attn
