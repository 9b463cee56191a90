#include "mlx_fused_attn/backend/cpu/attention_cpu.h"

#include <stdexcept>
#include <utility>

#include "mlx/allocator.h"
#include "mlx_fused_attn/backend/cpu/dispatch.h"
#include "mlx_fused_attn/backend/cpu/problem.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::cpu {

using namespace mlx::core;

namespace {

/// The forward's problem but for its pointers, which run() sets when the
/// kernel runs.
Problem forward_problem(
    const AttentionPlan& plan,
    const CallInputs& call,
    const array& out) {
  Problem pr{};
  // The output's strides are its row-major ones, as dispatch() allocates it
  // (and as the held output that run_merge updates in place has them).
  pr.p = launch_params(plan, call.q, call.k, call.v, out, call.mask);
  pr.q_dstride = call.q.strides()[3];
  pr.k_dstride = call.k.strides()[3];
  pr.v_dstride = call.v.strides()[3];
  pr.dtype = plan.dtype;
  pr.mask = plan.spec.mask;
  return pr;
}

/// The kernel run on the problem `pr` with the eval's arrays; in merge
/// mode the held output and LSE are the inputs from `held`.
auto forward_kernel(Problem pr, OptionalInputs at, int held = -1) {
  return [pr, at, held](
             const std::vector<array>& in, std::vector<array>& out) mutable {
    if (held >= 0) {
      pr.held_out = in[held].data<void>();
      pr.held_lse = in[held + 1].data<float>();
    }
    pr.q = in[kCallQ].data<void>();
    pr.k = in[kCallK].data<void>();
    pr.v = in[kCallV].data<void>();
    pr.mask_data = at.mask >= 0 ? in[at.mask].data<void>() : nullptr;
    pr.sinks = at.sinks >= 0 ? in[at.sinks].data<void>() : nullptr;
    pr.out = out[0].data<void>();
    pr.lse = out.size() > 1 ? out[1].data<float>() : nullptr;
    run_best(pr);
  };
}

} // namespace

void run(
    const AttentionPlan& plan,
    const std::vector<array>& inputs,
    std::vector<array>& outputs,
    Stream s) {
  const CallInputs call = call_inputs(plan.spec, inputs);
  const Problem pr = forward_problem(plan, call, outputs[0]);
  dispatch(
      s, inputs, outputs,
      forward_kernel(pr, optional_inputs(plan.spec, kCallOptional)));
}

void run_merge(
    const AttentionPlan& plan,
    const std::vector<array>& inputs,
    array& out,
    array& lse,
    Stream s) {
  const int held = call_input_count(plan.spec);
  const array& held_out = inputs[held];
  const array& held_lse = inputs[held + 1];
  // The held output and LSE are written over where nothing else reads
  // them (the accumulator of a loop); else the merge goes to new buffers.
  bool fresh = true;
  for (const auto& [before, after] :
       {std::pair{&held_out, &out}, std::pair{&held_lse, &lse}}) {
    if (before->is_donatable() && before->flags().row_contiguous) {
      after->copy_shared_buffer(*before);
      fresh = false;
    } else {
      after->set_data(allocator::malloc(after->nbytes()));
    }
  }
  const CallInputs call = call_inputs(plan.spec, inputs);
  Problem pr = forward_problem(plan, call, out);
  pr.merge = true;
  for (int d = 0; d < 4; ++d) {
    pr.held_o_strides[d] = held_out.strides()[d];
  }
  for (int d = 0; d < 3; ++d) {
    pr.held_lse_strides[d] = held_lse.strides()[d];
  }
  std::vector<array> outputs = {out, lse};
  // The LSE is no graph output until FusedAttentionMergedLse hands it on:
  // the task keeps it alive.
  dispatch_into(
      s, inputs, outputs, fresh,
      [kernel = forward_kernel(
           pr, optional_inputs(plan.spec, kCallOptional), held),
       lse](const std::vector<array>& in, std::vector<array>& out) mutable {
        kernel(in, out);
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
