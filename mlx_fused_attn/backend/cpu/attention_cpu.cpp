#include "mlx_fused_attn/backend/cpu/attention_cpu.h"

#include "mlx_fused_attn/backend/cpu/cpu_covers.h"
#include "mlx_fused_attn/backend/cpu/dispatch.h"
#include "mlx_fused_attn/backend/cpu/problem.h"

namespace mlx_fused_attn::cpu {

using namespace mlx::core;

void plan(const AttentionCall& call, AttentionPlan& plan) {
  plan_cpu_kernel(KernelFamily::Attention, call.inputs[0].dtype(), plan);
}

void run(
    const AttentionPlan& plan,
    const std::vector<array>& inputs,
    array& out,
    Stream s) {
  const array &q = inputs[0], &k = inputs[1], &v = inputs[2];
  const int mi = mask_index(plan.spec), si = sinks_index(plan.spec);

  Problem pr{};
  // The output's strides are its row-major ones, as dispatch() allocates it.
  pr.p = launch_params(plan, q, k, v, out, mi >= 0 ? &inputs[mi] : nullptr);
  pr.q_dstride = q.strides()[3];
  pr.k_dstride = k.strides()[3];
  pr.v_dstride = v.strides()[3];
  pr.dtype = plan.dtype;
  pr.mask = plan.spec.mask;

  dispatch(
      s, inputs, out,
      [pr, mi, si](const std::vector<array>& in, array& out) mutable {
        pr.q = in[0].data<void>();
        pr.k = in[1].data<void>();
        pr.v = in[2].data<void>();
        pr.mask_data = mi >= 0 ? in[mi].data<void>() : nullptr;
        pr.sinks = si >= 0 ? in[si].data<void>() : nullptr;
        pr.out = out.data<void>();
        run_best(pr);
      });
}

} // namespace mlx_fused_attn::cpu
