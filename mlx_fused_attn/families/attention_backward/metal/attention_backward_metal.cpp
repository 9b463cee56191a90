// The fused backward of the GPU interface (backend/gpu.h) on Metal: its
// pipelines built and its dispatch, three kernels (mlx_fused_attn/families/attention_backward/attention_backward_row_dot.metal,
// then mlx_fused_attn/families/attention_backward/attention_backward.metal): D = rowsum(dO * O) into a
// temporary, then dK/dV and dQ, which read it.
//
// The LSE comes from the forward's general kernel (has_lse), so a call the
// forward runs with the short kernel keeps plain-op gradients.
#include <stdexcept>
#include <string>
#include <variant>

#include "mlx/allocator.h"
#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/metal/attention_step_pipeline.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/families/strided_copy/metal/strided_copy_metal.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_config.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_kernel_name.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] Metal backward: ";
/// A backward kernel's pipeline, with its tiles and features.
MetalPipeline backward_pipeline(const AttentionPlan& plan, fa::BwdKernel kernel) {
  const fa::AttnTiles tiles = std::get<fa::AttnBwdTiles>(plan.tiles).of(kernel);
  const fa::AttnParams& p = plan.params;
  return attention_step_pipeline(
      KernelFamily::AttentionBackward,
      fa::attention_backward_kernel_name(kernel, plan.dtype, p.D, tiles),
      backward_kernel_features(plan, kernel), tiles.warps);
}

MetalPipeline row_dot_pipeline(fa::DType dtype) {
  MetalPipeline pl;
  pl.family = KernelFamily::AttentionBackwardRowDot;
  pl.kernel_name = fa::attention_backward_row_dot_name(dtype);
  pl.hash_name = pl.kernel_name;
  pl.threads = size_t(fa::kSimdWidth) * fa::kBwdRowDotWarps;
  return pl;
}

} // namespace

Support prepare_backward(const AttentionPlan& plan, mx::Stream s) {
  auto& d = mx::metal::device(s.device);
  // Built here, where the op and its vjp plan the backward before any graph
  // exists: a pipeline that fails leaves plain-op gradients with its reason
  // instead of a throw inside eval (the LSE-writing forward: training_plan).
  for (const MetalPipeline& pl :
       {backward_pipeline(plan, fa::BwdKernel::DkDv),
        backward_pipeline(plan, fa::BwdKernel::Dq),
        row_dot_pipeline(plan.dtype),
        strided_copy_pipeline(plan.dtype)}) {
    if (Support ready = pipeline_ready(d, pl); !ready.ok) {
      return named(kOp, ready);
    }
  }
  return Support::yes();
}

void run_backward(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& grads,
    mx::Stream s) {
  // The kernels index the LSE as the forward wrote it.
  if (!inputs[kBwdLse].flags().row_contiguous) {
    throw std::logic_error(
        "[FusedAttentionVJP] internal error: the LSE is not contiguous");
  }
  auto& d = mx::metal::device(s.device);
  auto& enc = mx::metal::get_command_encoder(s);
  const fa::AttnParams& p = plan.params;
  const auto& tiles = std::get<fa::AttnBwdTiles>(plan.tiles);

  std::vector<mx::array> in;
  for (int i : {kBwdQ, kBwdK, kBwdV, kBwdOut, kBwdLse, kBwdDout}) {
    const mx::array& x = inputs[i];
    in.push_back(
        i == kBwdLse ? x : with_contiguous_rows(x, plan.dtype, d, enc));
  }
  const bool has_mask = mask_index(plan.spec) >= 0;
  if (has_mask) {
    in.push_back(inputs[kBwdMask]);
  }
  for (mx::array& g : grads) {
    g.set_data(mx::allocator::malloc(g.nbytes()));
  }
  const mx::array* lists = backward_lists(plan, inputs);
  const fa::AttnBwdParams params =
      backward_launch_params(plan, in, grads, lists);
  mx::array dsum({p.B, p.H_q, p.L_q}, mx::float32, nullptr, {});
  dsum.set_data(mx::allocator::malloc(dsum.nbytes()));

  // ------------------------------------------------------------------- D
  enc.set_compute_pipeline_state(get_pipeline(d, row_dot_pipeline(plan.dtype)));
  enc.set_input_array(in[kBwdOut], 0);
  enc.set_input_array(in[kBwdDout], 1);
  enc.set_output_array(dsum, 2);
  enc.set_bytes(params, 3);
  enc.dispatch_threadgroups(
      MTL::Size(
          (p.L_q + fa::kBwdRowDotWarps - 1) / fa::kBwdRowDotWarps, p.H_q, p.B),
      MTL::Size(fa::kSimdWidth, fa::kBwdRowDotWarps, 1));

  // --------------------------------------------------------- dK, dV, dQ
  const auto bind_inputs = [&]() {
    for (int i : {kBwdQ, kBwdK, kBwdV}) {
      enc.set_input_array(in[i], i);
    }
    enc.set_input_array(in[kBwdDout], 3);
    enc.set_input_array(in[kBwdLse], 4);
    enc.set_input_array(dsum, 5);
    enc.set_bytes(params, 8);
    if (has_mask) {
      enc.set_input_array(in[kBwdMask], 9);
    }
    if (lists != nullptr) {
      enc.set_input_array(*lists, 10);
    }
  };
  enc.set_compute_pipeline_state(
      get_pipeline(d, backward_pipeline(plan, fa::BwdKernel::DkDv)));
  bind_inputs();
  enc.set_output_array(grads[1], 6);
  enc.set_output_array(grads[2], 7);
  enc.dispatch_threadgroups(
      MTL::Size((p.L_k + tiles.dkdv.bq - 1) / tiles.dkdv.bq, p.H_kv, p.B),
      MTL::Size(fa::kSimdWidth, tiles.dkdv.warps, 1));

  enc.set_compute_pipeline_state(
      get_pipeline(d, backward_pipeline(plan, fa::BwdKernel::Dq)));
  bind_inputs();
  enc.set_output_array(grads[0], 6);
  enc.dispatch_threadgroups(
      MTL::Size((p.L_q + tiles.dq.bq - 1) / tiles.dq.bq, p.H_q, p.B),
      MTL::Size(fa::kSimdWidth, tiles.dq.warps, 1));
  enc.add_temporary(dsum);
}

} // namespace mlx_fused_attn::gpu
