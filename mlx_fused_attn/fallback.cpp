#include "mlx_fused_attn/fallback.h"

#include "mlx/ops.h"
#include "mlx/utils.h"

namespace mlx_fused_attn {

using namespace mlx::core;

array attention_fallback(
    const AttentionSpec& spec,
    const std::vector<array>& inputs,
    Stream s) {
  const array& q_in = inputs[0];
  const int B = q_in.shape(0), H_q = q_in.shape(1), L_q = q_in.shape(2);
  const int H_kv = inputs[1].shape(1), L_k = inputs[1].shape(2);
  const int group = H_q / H_kv;
  const Dtype dt = q_in.dtype();

  // GQA without repeating k and v: view q as [B, H_kv, group, L_q, D] and
  // give k, v a broadcast group axis.
  array q = multiply(array(spec.scale, dt), q_in, s);
  q = reshape(q, {B, H_kv, group, L_q, q.shape(3)}, s);
  array k = expand_dims(inputs[1], 2, s);
  array v = expand_dims(inputs[2], 2, s);

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
  array probs = softmax(scores, std::vector<int>{-1}, /* precise = */ true, s);
  if (spec.has_sinks) {
    probs = slice(probs, {0, 0, 0, 0, 1}, probs.shape(), s);
  }
  array out = matmul(probs, v, s);
  return reshape(out, {B, H_q, L_q, out.shape(4)}, s);
}

} // namespace mlx_fused_attn
