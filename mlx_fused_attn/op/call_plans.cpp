#include "mlx_fused_attn/op/call_plans.h"

#include "mlx_fused_attn/plan/attention_planner.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/gpu_na.h"
#include "mlx_fused_attn/backend/gpu_quantized.h"
#include "mlx_fused_attn/backend/kernel_availability.h"
#include "mlx_fused_attn/plan/na_planner.h"
#include "mlx_fused_attn/plan/quantized_attention_planner.h"

namespace mlx_fused_attn {

namespace {

bool on_cpu(const mlx::core::Stream& s) {
  return s.device == mlx::core::Device::cpu;
}

/// The caps of the stream's device: the CPU kernels', or its GPU's.
DeviceCaps caps_of(const mlx::core::Stream& s) {
  if (on_cpu(s)) {
    DeviceCaps caps;
    caps.cpu = true;
    return caps;
  }
  return gpu::device_caps(s);
}

/// The first plan of `planner` whose kernels `prepare` builds: each family
/// that fails to build leaves the caps with its reason, so the planner
/// moves on to the next (or says why none runs). Ends: every round takes a
/// family off.
template <typename Plan, typename Planner, typename Prepare>
Plan plan_until_built(DeviceCaps caps, Planner planner, Prepare prepare) {
  for (;;) {
    Plan plan = planner(caps);
    if (!plan.fused()) {
      return plan;
    }
    const Support built = prepare(plan);
    if (built.ok) {
      return plan;
    }
    caps.unavailable.emplace_back(*plan.family, built.reason);
  }
}

} // namespace

AttentionPlan plan_attention(const AttentionCall& call) {
  return plan_until_built<AttentionPlan>(
      caps_of(call.stream),
      [&](const DeviceCaps& caps) { return attention_plan_for(call, caps); },
      [&](const AttentionPlan& plan) {
        return on_cpu(call.stream) ? cpu_kernel_available(*plan.family)
                                   : gpu::prepare(plan, call.stream);
      });
}

AttentionPlan plan_attention_backward(const AttentionCall& call) {
  // The GPU backward reads the LSE that only the general kernel writes.
  const AttentionPlan forward =
      on_cpu(call.stream) ? AttentionPlan{} : plan_attention(call);
  return plan_until_built<AttentionPlan>(
      caps_of(call.stream),
      [&](const DeviceCaps& caps) {
        return attention_backward_plan_for(call, caps, forward);
      },
      [&](const AttentionPlan& plan) {
        return on_cpu(call.stream) ? cpu_kernel_available(*plan.family)
                                   : gpu::prepare_backward(plan, call.stream);
      });
}

NaPlan plan_neighborhood(const NaCall& call) {
  return plan_until_built<NaPlan>(
      caps_of(call.stream),
      [&](const DeviceCaps& caps) {
        return neighborhood_plan_for(call, caps);
      },
      [&](const NaPlan& plan) {
        return on_cpu(call.stream) ? cpu_kernel_available(*plan.family)
                                   : gpu::na_prepare(plan, call.stream);
      });
}

QuantizedAttentionPlan plan_quantized_attention(
    const QuantizedAttentionCall& call) {
  return plan_until_built<QuantizedAttentionPlan>(
      caps_of(call.stream),
      [&](const DeviceCaps& caps) {
        return quantized_attention_plan_for(call, caps);
      },
      [&](const QuantizedAttentionPlan& plan) {
        return on_cpu(call.stream) ? cpu_kernel_available(*plan.family)
                                   : gpu::quantized_prepare(plan, call.stream);
      });
}

} // namespace mlx_fused_attn
