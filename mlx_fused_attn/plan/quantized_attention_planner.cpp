#include "mlx_fused_attn/plan/quantized_attention_planner.h"

#include <sstream>

#include "mlx/utils.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

std::string op_name(const DeviceCaps& caps) {
  return "[quantized_scaled_dot_product_attention] " + caps.name + ": ";
}

/// The plan's family-independent part: shapes, scale and mask features.
QuantizedAttentionPlan shape_plan(const QuantizedAttentionCall& call) {
  const array& q = call.inputs[kQuantQ];
  const array& k_words = call.inputs[kQuantKWords];
  QuantizedAttentionPlan plan;
  plan.spec = call.spec;
  fa::AttnParams& p = plan.params;
  p.B = q.shape(0);
  p.H_q = q.shape(1);
  p.H_kv = k_words.shape(1);
  p.gqa_factor = p.H_q / p.H_kv;
  p.L_q = q.shape(2);
  p.L_k = k_words.shape(2);
  p.D = q.shape(3);
  p.D_v = quantized_output_shape(call.inputs)[3];
  p.causal_offset = p.L_k - p.L_q;
  p.scale_log2 = call.spec.attention.scale * kLog2e;

  fa::AttnFeatures& f = plan.features;
  const MaskKind mask = call.spec.attention.mask;
  f.has_mask = quantized_mask_index(call.spec) >= 0;
  f.bool_mask = mask == MaskKind::Bool;
  f.causal = mask == MaskKind::Causal;
  f.has_sinks = call.spec.attention.has_sinks;
  return plan;
}

bool has_empty_input(
    const QuantizedAttentionCall& call,
    QuantizedAttentionPlan& plan) {
  for (const auto& a : call.inputs) {
    if (a.size() == 0) {
      plan.reason = "an input is empty; empty calls run as plain MLX ops";
      return true;
    }
  }
  return false;
}

/// Decode with GQA: the gqa_factor query heads of a key/value head become
/// the rows of one block of H_kv heads, so its K and V are dequantized once
/// for all of them. At L_q = 1 the causal mask hides no key.
void pack_gqa_rows(QuantizedAttentionPlan& plan) {
  fa::AttnParams& p = plan.params;
  if (p.L_q != 1 || p.gqa_factor == 1) {
    return;
  }
  p.L_q = p.gqa_factor;
  p.H_q = p.H_kv;
  p.gqa_factor = 1;
  p.causal_offset = p.L_k - 1;
  plan.features.causal = false;
  plan.packed_gqa = true;
}

/// The CPU kernel takes every head dim and code width the op admits; its
/// one limit is the element type.
Support cpu_kernel_covers(
    const QuantizedAttentionCall& call,
    QuantizedAttentionPlan& plan) {
  const Dtype dtype = call.inputs[kQuantQ].dtype();
  const auto kernel = kernel_dtype(dtype);
  if (!kernel) {
    std::ostringstream msg;
    msg << "the fused CPU kernel takes float16, bfloat16 or float32, not "
        << dtype << "; this call runs as plain MLX ops";
    return Support::no(msg.str());
  }
  plan.dtype = *kernel;
  return Support::yes();
}

/// Where the GPU family (Metal, CUDA: issue 43's kernels) plans its tiles
/// and grid; no GPU backend of this tree has quantized K/V kernels yet.
Support plan_gpu(const DeviceCaps& caps, QuantizedAttentionPlan&) {
  return Support::no(
      op_name(caps) +
      "no GPU kernel reads a quantized K/V cache in this build; the call "
      "dequantizes K and V and runs as plain MLX ops");
}

Support family_built(const DeviceCaps& caps) {
  const std::string* reason =
      caps.unavailable_reason(KernelFamily::QuantizedAttention);
  return reason == nullptr ? Support::yes() : Support::no(*reason);
}

} // namespace

QuantizedAttentionPlan quantized_attention_plan_for(
    const QuantizedAttentionCall& call,
    const DeviceCaps& caps) {
  QuantizedAttentionPlan plan = shape_plan(call);
  if (has_empty_input(call, plan)) {
    return plan;
  }
  if (caps.cpu) {
    if (admitted(cpu_kernel_covers(call, plan), plan) &&
        admitted(family_built(caps), plan)) {
      pack_gqa_rows(plan);
      plan.family = KernelFamily::QuantizedAttention;
    }
    return plan;
  }
  if (!caps.gpu) {
    plan.reason = caps.refusal;
    return plan;
  }
  if (!caps.refusal.empty()) {
    plan.reason = op_name(caps) + caps.refusal;
    return plan;
  }
  if (admitted(plan_gpu(caps, plan), plan) &&
      admitted(family_built(caps), plan)) {
    plan.family = KernelFamily::QuantizedAttention;
  }
  return plan;
}

} // namespace mlx_fused_attn
