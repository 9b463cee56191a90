#include "mlx_fused_attn/op/lse_gradient.h"

#include "mlx/ops.h"
#include "mlx_fused_attn/op/attention.h"
#include "mlx_fused_attn/op/backward_primitive.h"
#include "mlx_fused_attn/op/fallback.h"
#include "mlx_fused_attn/op/transforms.h"
#include "mlx_fused_attn/plan/call.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

/// The call's mask as the op takes it.
Mask op_mask(const AttentionSpec& spec, const std::vector<array>& primals) {
  if (spec.mask == MaskKind::Causal) {
    return std::string("causal");
  }
  const int mi = mask_index(spec);
  return mi >= 0 ? Mask(primals[mi]) : Mask();
}

} // namespace

std::vector<array> lse_vjp(
    const AttentionSpec& spec,
    const std::vector<array>& primals,
    const array& lse,
    const array& cotangent,
    const std::vector<int>& argnums,
    Stream s) {
  const array& q = primals[0];
  const array& k = primals[1];
  const Dtype dt = q.dtype();
  const int si = sinks_index(spec);
  const std::optional<array> sinks =
      si >= 0 ? std::optional<array>(primals[si]) : std::nullopt;
  const array g = where(
      isfinite(lse, s), astype(cotangent, float32, s), array(0.0f), s);
  const array g_col = expand_dims(g, -1, s);

  std::vector<array> result;
  for (int a : argnums) {
    if (a == 0) {
      const array pk = scaled_dot_product_attention(
          q, k, k, spec.scale, op_mask(spec, primals), sinks,
          spec.force_fused, s);
      result.push_back(astype(
          multiply(multiply(g_col, astype(pk, float32, s), s),
                   array(spec.scale), s),
          dt, s));
    } else if (a == 1) {
      std::vector<array> with_k_as_v = primals;
      with_k_as_v[2] = k;
      const array gq = astype(multiply(g_col, astype(q, float32, s), s), dt, s);
      // dV of the backward is P^T dO; O enters only its dQ and dK, unused.
      const array p_t_gq = attention_vjp(
          spec, with_k_as_v, zeros(q.shape(), dt, s), lse, gq, {2}, s)[0];
      result.push_back(astype(
          multiply(astype(p_t_gq, float32, s), array(spec.scale), s), dt, s));
    } else if (a == 2) {
      result.push_back(zeros_like(primals[2], s));
    } else if (a == si) {
      const array& sk = primals[si];
      const array logit =
          reshape(astype(sk, float32, s), {1, sk.shape(0), 1}, s);
      const array p_sink = where(
          isfinite(lse, s), exp(subtract(logit, lse, s), s), array(0.0f), s);
      result.push_back(astype(
          sum(multiply(p_sink, g, s), {0, 2}, false, s), sk.dtype(), s));
    } else if (spec.mask == MaskKind::Bool) {
      result.push_back(zeros_like(primals[a], s));
    } else {
      // An additive mask's gradient is g_i P_ij: the L_q x L_k scores.
      const Definition plain_lse = [&](const std::vector<array>& in) {
        return attention_lse_fallback(spec, in, s);
      };
      result.push_back(vjp_through(plain_lse, primals, {g}, {a})[0]);
    }
  }
  return result;
}

} // namespace mlx_fused_attn
