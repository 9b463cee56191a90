#include "mlx_fused_attn/na_plan.h"

#include "mlx_fused_attn/backend/cpu/na_cpu.h"
#include "mlx_fused_attn/backend/gpu_na.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

/// The plan's family-independent part: shapes, geometry and scale.
NaPlan shape_plan(const NaCall& call) {
  const array& q = call.inputs[0];
  NaPlan plan;
  plan.spec = call.spec;
  fa::NaParams& p = plan.params;
  p.B = q.shape(0);
  p.H = q.shape(-2);
  p.D = q.shape(-1);
  p.D_v = call.inputs[2].shape(-1);
  p.n_axes = call.spec.n_axes;
  p.L = 1;
  for (int a = 0; a < fa::kNaMaxAxes; ++a) {
    p.axes[a] = call.spec.axes[a];
    p.L *= call.spec.axes[a].n;
  }
  p.scale_log2 = call.spec.scale * kLog2e;
  return plan;
}

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

NaPlan plan_neighborhood(const NaCall& call) {
  NaPlan plan = shape_plan(call);
  for (int a = 0; a < call.spec.n_axes; ++a) {
    // The windows were checked against the op's spatial shape; a shapeless
    // compile that changes it needs the op again, not a new plan.
    if (call.inputs[0].shape(1 + a) != call.spec.axes[a].n) {
      plan.reason =
          "the spatial shape differs from the one the windows were made for";
      return plan;
    }
  }
  if (call.inputs[0].size() == 0) {
    plan.reason = "an input is empty; empty calls run as plain MLX ops";
    return plan;
  }
  if (call.stream.device == Device::cpu) {
    cpu::na_plan(call, plan);
  } else {
    gpu::na_plan(call, plan);
  }
  return plan;
}

fa::NaParams na_launch_params(
    const NaPlan& plan,
    const array& q,
    const array& k,
    const array& v,
    const array& out) {
  fa::NaParams p = plan.params;
  na_strides(q, p.n_axes, p.q_strides);
  na_strides(k, p.n_axes, p.k_strides);
  na_strides(v, p.n_axes, p.v_strides);
  na_strides(out, p.n_axes, p.o_strides);
  return p;
}

} // namespace mlx_fused_attn
