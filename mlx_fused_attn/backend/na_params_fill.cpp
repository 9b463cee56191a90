#include "mlx_fused_attn/backend/na_params_fill.h"

#include <cmath>

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

/// Strides of [batch, axis 0..2, head] of a [B, *spatial, H, D] array; 0 on
/// unused axes.
void na_strides(const array& x, int n_axes, fa::stride_t* dst) {
  dst[0] = x.strides()[0];
  for (int a = 0; a < fa::kNaMaxAxes; ++a) {
    dst[1 + a] = a < n_axes ? x.strides()[1 + a] : 0;
  }
  dst[4] = x.strides()[1 + n_axes];
}

} // namespace

fa::NaParams na_params(
    const NaSpec& spec,
    const array& q,
    const array& k,
    const array& v,
    const array& out) {
  fa::NaParams p{};
  p.B = q.shape(0);
  p.H = q.shape(-2);
  p.D = q.shape(-1);
  p.D_v = v.shape(-1);
  p.n_axes = spec.n_axes;
  p.L = 1;
  for (int a = 0; a < fa::kNaMaxAxes; ++a) {
    p.axes[a] = spec.axes[a];
    p.L *= spec.axes[a].n;
  }
  p.scale_log2 = spec.scale * static_cast<float>(M_LOG2E);
  na_strides(q, spec.n_axes, p.q_strides);
  na_strides(k, spec.n_axes, p.k_strides);
  na_strides(v, spec.n_axes, p.v_strides);
  na_strides(out, spec.n_axes, p.o_strides);
  return p;
}

} // namespace mlx_fused_attn
