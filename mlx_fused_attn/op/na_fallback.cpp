#include "mlx_fused_attn/op/na_fallback.h"

#include <cstdint>

#include "mlx/ops.h"
#include "mlx_fused_attn/op/fallback.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

/// allowed[i][j]: token j is in token i's neighborhood, for the L tokens of
/// one image in row-major order of the axes.
array neighborhood_mask(const NaSpec& spec, int L, Stream s) {
  std::vector<uint8_t> allowed(static_cast<size_t>(L) * L, 0);
  for (int i = 0; i < L; ++i) {
    fa::NaWindow win[fa::kNaMaxAxes];
    for (int a = fa::kNaMaxAxes - 1, t = i; a >= 0; --a) {
      win[a] = fa::na_window(spec.axes[a], t % spec.axes[a].n);
      t /= spec.axes[a].n;
    }
    for (int i0 = 0; i0 < win[0].count; ++i0) {
      for (int i1 = 0; i1 < win[1].count; ++i1) {
        for (int i2 = 0; i2 < win[2].count; ++i2) {
          const int c0 = win[0].first + i0 * spec.axes[0].d;
          const int c1 = win[1].first + i1 * spec.axes[1].d;
          const int c2 = win[2].first + i2 * spec.axes[2].d;
          const int j = (c0 * spec.axes[1].n + c1) * spec.axes[2].n + c2;
          allowed[static_cast<size_t>(i) * L + j] = 1;
        }
      }
    }
  }
  return astype(array(allowed.data(), {L, L}, uint8), bool_, s);
}

} // namespace

array neighborhood_fallback(
    const NaSpec& spec,
    const std::vector<array>& inputs,
    Stream s) {
  const array& q = inputs[0];
  const int B = q.shape(0), H = q.shape(-2);
  int L = 1;
  for (int a = 0; a < spec.n_axes; ++a) {
    L *= spec.axes[a].n;
  }
  auto to_bhld = [&](const array& x) {
    return transpose(reshape(x, {B, L, H, x.shape(-1)}, s), {0, 2, 1, 3}, s);
  };
  std::vector<array> attn_inputs = {
      to_bhld(inputs[0]), to_bhld(inputs[1]), to_bhld(inputs[2]),
      broadcast_to(neighborhood_mask(spec, L, s), {B, H, L, L}, s)};
  AttentionSpec attn{spec.scale, MaskKind::Bool, false};
  array out = attention_fallback(attn, attn_inputs, s);
  return reshape(transpose(out, {0, 2, 1, 3}, s), na_output_shape(inputs), s);
}

} // namespace mlx_fused_attn
