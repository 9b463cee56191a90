#include "mlx_fused_attn/op/neighborhood.h"

#include <cmath>

#include "mlx/ops.h"
#include "mlx_fused_attn/op/errors.h"
#include "mlx_fused_attn/op/na_fallback.h"
#include "mlx_fused_attn/op/call_plans.h"
#include "mlx_fused_attn/op/neighborhood_primitive.h"
#include "mlx_fused_attn/notices.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

template <typename... Parts>
std::string message(const Parts&... parts) {
  return op_message("neighborhood_attention", parts...);
}

template <typename T>
std::vector<T> per_axis(const std::vector<T>& v, int n_axes, const char* name) {
  if (v.size() == 1) {
    return std::vector<T>(n_axes, v[0]);
  }
  if (static_cast<int>(v.size()) != n_axes) {
    throw std::invalid_argument(message(
        name, " must have one value or one per spatial axis (", n_axes,
        "); got ", v.size()));
  }
  return v;
}

NaCall validate(
    const array& q,
    const array& k,
    const array& v,
    const std::vector<int>& kernel_size,
    const std::vector<int>& dilation,
    const std::vector<bool>& is_causal,
    std::optional<float> scale,
    StreamOrDevice sd) {
  const char* names[] = {"q", "k", "v"};
  const array* qkv[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    if (qkv[i]->ndim() < 4 || qkv[i]->ndim() > 6) {
      throw std::invalid_argument(message(
          names[i], " must be [B, *spatial, H, D] with 1 to 3 spatial axes "
          "(rank 4 to 6); got shape ", qkv[i]->shape()));
    }
    if (!issubdtype(qkv[i]->dtype(), floating)) {
      throw TypeError(message(
          names[i], " must be a floating-point array (float16, bfloat16, "
          "float32); got ", qkv[i]->dtype()));
    }
  }
  for (int i = 1; i < 3; ++i) {
    const array& x = *qkv[i];
    bool same = x.ndim() == q.ndim();
    for (int a = 0; same && a + 1 < static_cast<int>(q.ndim()); ++a) {
      same = x.shape(a) == q.shape(a);
    }
    if (!same) {
      throw std::invalid_argument(message(
          names[i], " must match q in batch, spatial axes and heads ",
          q.shape(), "; got ", x.shape()));
    }
  }
  if (k.shape(-1) != q.shape(-1)) {
    throw std::invalid_argument(message(
        "k must have the head dim of q (", q.shape(-1), "); got ", k.shape(-1)));
  }

  const int n_axes = static_cast<int>(q.ndim()) - 3;
  if (kernel_size.empty() || dilation.empty() || is_causal.empty()) {
    throw std::invalid_argument(message(
        "kernel_size, dilation and is_causal need at least one value"));
  }
  auto ks = per_axis(kernel_size, n_axes, "kernel_size");
  auto ds = per_axis(dilation, n_axes, "dilation");
  auto cs = per_axis(is_causal, n_axes, "is_causal");

  NaSpec spec{};
  spec.n_axes = n_axes;
  for (int a = 0; a < fa::kNaMaxAxes; ++a) {
    spec.axes[a] = {1, 1, 1, 0};
  }
  for (int a = 0; a < n_axes; ++a) {
    const int n = q.shape(1 + a);
    if (ds[a] < 1) {
      throw std::invalid_argument(message(
          "dilation must be >= 1 on every axis; got ", ds[a], " on axis ", a));
    }
    // The shortest dilation group has n / d positions (1 if d > n).
    const int shortest = std::max(1, n / ds[a]);
    if (ks[a] < 1 || ks[a] > shortest) {
      throw std::invalid_argument(message(
          "kernel_size on axis ", a, " must be in [1, ", shortest,
          "] (axis length ", n, " / dilation ", ds[a],
          " gives dilation groups that short); got ", ks[a]));
    }
    spec.axes[a] = {n, ks[a], ds[a], cs[a] ? 1 : 0};
  }
  const float sc =
      scale.value_or(1.0f / std::sqrt(static_cast<float>(q.shape(-1))));
  if (!std::isfinite(sc)) {
    throw std::invalid_argument(message("scale must be finite; got ", sc));
  }
  spec.scale = sc;

  const Dtype dt = promote_types(promote_types(q.dtype(), k.dtype()), v.dtype());
  Stream s = to_stream(sd);
  return {spec, {astype(q, dt, s), astype(k, dt, s), astype(v, dt, s)}, s};
}

} // namespace

array neighborhood_attention(
    const array& q,
    const array& k,
    const array& v,
    const std::vector<int>& kernel_size,
    const std::vector<int>& dilation,
    const std::vector<bool>& is_causal,
    std::optional<float> scale,
    StreamOrDevice s) {
  NaCall call = validate(q, k, v, kernel_size, dilation, is_causal, scale, s);
  const NaPlan plan = plan_neighborhood(call);
  if (plan.fused()) {
    return fused_neighborhood(call, plan);
  }
  note_fallback("neighborhood_attention", call.stream.device, plan.reason);
  return neighborhood_fallback(call.spec, call.inputs, call.stream);
}

std::pair<bool, std::string> neighborhood_can_use_fused(
    const array& q,
    const array& k,
    const array& v,
    const std::vector<int>& kernel_size,
    const std::vector<int>& dilation,
    const std::vector<bool>& is_causal,
    std::optional<float> scale,
    StreamOrDevice s) {
  const NaPlan plan = plan_neighborhood(
      validate(q, k, v, kernel_size, dilation, is_causal, scale, s));
  return {plan.fused(), plan.reason};
}

} // namespace mlx_fused_attn
