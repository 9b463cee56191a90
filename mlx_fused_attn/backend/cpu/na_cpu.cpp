#include "mlx_fused_attn/backend/cpu/na_cpu.h"

#include <cmath>

#include "mlx_fused_attn/backend/cpu/dispatch.h"
#include "mlx_fused_attn/backend/cpu/problem.h"

namespace mlx_fused_attn::cpu {

using namespace mlx::core;

namespace {

// Strides of [batch, axis 0..2, head] for a [B, *spatial, H, D] array, zero
// for absent axes.
void na_strides(const Strides& st, int n_axes, fa::stride_t* dst) {
  dst[0] = st[0];
  for (int a = 0; a < fa::kNaMaxAxes; ++a) {
    dst[1 + a] = a < n_axes ? st[1 + a] : 0;
  }
  dst[4] = st[1 + n_axes];
}

} // namespace

void neighborhood(
    const NaSpec& spec,
    const std::vector<array>& inputs,
    array& out,
    Stream s) {
  const array &q = inputs[0], &k = inputs[1], &v = inputs[2];
  NaProblem pr{};
  fa::NaParams& p = pr.p;
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
  na_strides(q.strides(), spec.n_axes, p.q_strides);
  na_strides(k.strides(), spec.n_axes, p.k_strides);
  na_strides(v.strides(), spec.n_axes, p.v_strides);
  // dispatch() allocates the output row-major.
  Strides o_strides(out.ndim(), 1);
  for (int i = static_cast<int>(out.ndim()) - 2; i >= 0; --i) {
    o_strides[i] = o_strides[i + 1] * out.shape(i + 1);
  }
  na_strides(o_strides, spec.n_axes, p.o_strides);
  pr.q_dstride = q.strides().back();
  pr.k_dstride = k.strides().back();
  pr.v_dstride = v.strides().back();
  pr.dtype = kernel_dtype(q.dtype());

  dispatch(s, inputs, out, [pr](const std::vector<array>& in, array& out) mutable {
    pr.q = in[0].data<void>();
    pr.k = in[1].data<void>();
    pr.v = in[2].data<void>();
    pr.out = out.data<void>();
    run_best(pr);
  });
}

} // namespace mlx_fused_attn::cpu
