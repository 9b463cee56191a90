#include "mlx_fused_attn/backend/cpu/attention_cpu.h"

#include <stdexcept>

#include "mlx_fused_attn/backend/cpu/dispatch.h"
#include "mlx_fused_attn/backend/cpu/problem.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::cpu {

using namespace mlx::core;

void run(
    const AttentionPlan& plan,
    const std::vector<array>& inputs,
    std::vector<array>& outputs,
    Stream s) {
  const CallInputs call = call_inputs(plan.spec, inputs);
  const array &q = call.q, &k = call.k, &v = call.v;
  const OptionalInputs at = optional_inputs(plan.spec, kCallOptional);

  Problem pr{};
  // The output's strides are its row-major ones, as dispatch() allocates it.
  pr.p = launch_params(plan, q, k, v, outputs[0], call.mask);
  pr.q_dstride = q.strides()[3];
  pr.k_dstride = k.strides()[3];
  pr.v_dstride = v.strides()[3];
  pr.dtype = plan.dtype;
  pr.mask = plan.spec.mask;

  dispatch(
      s, inputs, outputs,
      [pr, at](
          const std::vector<array>& in, std::vector<array>& out) mutable {
        pr.q = in[kCallQ].data<void>();
        pr.k = in[kCallK].data<void>();
        pr.v = in[kCallV].data<void>();
        pr.mask_data = at.mask >= 0 ? in[at.mask].data<void>() : nullptr;
        pr.sinks = at.sinks >= 0 ? in[at.sinks].data<void>() : nullptr;
        pr.out = out[0].data<void>();
        pr.lse = out.size() > 1 ? out[1].data<float>() : nullptr;
        run_best(pr);
      });
}

void run_backward(
    const AttentionPlan& plan,
    const std::vector<array>& inputs,
    std::vector<array>& grads,
    Stream s) {
  // The kernel indexes the LSE as the forward wrote it.
  if (!inputs[kBwdLse].flags().row_contiguous) {
    throw std::logic_error(
        "[FusedAttentionVJP] internal error: the LSE is not contiguous");
  }
  const bool has_mask = mask_index(plan.spec) >= 0;
  BwdProblem pr{};
  // The gradients' strides are their row-major ones, as dispatch()
  // allocates them.
  pr.p = backward_launch_params(plan, inputs, grads);
  pr.q_dstride = inputs[kBwdQ].strides()[3];
  pr.k_dstride = inputs[kBwdK].strides()[3];
  pr.v_dstride = inputs[kBwdV].strides()[3];
  pr.o_dstride = inputs[kBwdOut].strides()[3];
  pr.do_dstride = inputs[kBwdDout].strides()[3];
  pr.dtype = plan.dtype;
  pr.mask = plan.spec.mask;

  dispatch(
      s, inputs, grads,
      [pr, has_mask](
          const std::vector<array>& in, std::vector<array>& out) mutable {
        pr.q = in[kBwdQ].data<void>();
        pr.k = in[kBwdK].data<void>();
        pr.v = in[kBwdV].data<void>();
        pr.o = in[kBwdOut].data<void>();
        pr.lse = in[kBwdLse].data<float>();
        pr.dout = in[kBwdDout].data<void>();
        pr.mask_data = has_mask ? in[kBwdMask].data<void>() : nullptr;
        pr.dq = out[0].data<void>();
        pr.dk = out[1].data<void>();
        pr.dv = out[2].data<void>();
        run_best(pr);
      });
}

} // namespace mlx_fused_attn::cpu
