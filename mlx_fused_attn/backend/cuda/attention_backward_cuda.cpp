// The fused backward of the GPU interface (backend/gpu.h) on CUDA: its plan
// and its launch, three kernel nodes (attention_backward_kernel.cuh): D =
// rowsum(dO * O) into a temporary, then dK/dV and dQ, which read it.
//
// The LSE comes from the forward's general kernel (has_lse), so a call the
// forward runs with the short kernel keeps plain-op gradients.
#include <cuda_runtime.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>

#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"
#include "mlx_fused_attn/backend/attention_covers.h"
#include "mlx_fused_attn/backend/cuda/device_buffer.h"
#include "mlx_fused_attn/backend/cuda/kernel_families.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/kernels/attention_backward_config.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] CUDA backward: ";
/// Grid limits of the y (heads) and z (batch) axes.
constexpr int kMaxGridYZ = 65535;

cuda::AttentionBackwardKernelKey key_of(
    const AttentionPlan& plan,
    fa::BwdKernel kernel) {
  return {
      kernel,
      plan.dtype,
      plan.params.D,
      std::get<fa::AttnBwdTiles>(plan.tiles).of(kernel),
      plan.features.causal,
      plan.features.has_mask};
}

Support backward_covers(const AttentionCall& call, AttentionPlan& plan) {
  if (Support covered = attention_backward_covers(kOp, call, plan);
      !covered.ok) {
    return covered;
  }
  const fa::AttnParams& p = plan.params;
  if (p.B > kMaxGridYZ || p.H_q > kMaxGridYZ) {
    std::ostringstream msg;
    msg << kOp << "batch " << p.B << " or query heads " << p.H_q
        << " over the grid limit of " << kMaxGridYZ;
    return Support::no(msg.str());
  }
  return Support::yes();
}

} // namespace

void plan_backward(const AttentionCall& call, AttentionPlan& plan) {
  if (!admitted(backward_covers(call, plan), plan)) {
    return;
  }
  cu::Device& d = cu::device(call.stream.device);
  const int device = d.cuda_device();
  const int arch = cuda::arch_of(d);
  plan.tiles = fa::choose_attention_backward_tiles(
      plan.params.D, plan.dtype, fa::Backend::Cuda, cuda::has_wgmma(arch));
  for (fa::BwdKernel kernel : {fa::BwdKernel::DkDv, fa::BwdKernel::Dq}) {
    if (!admitted(
            named(kOp, cuda::kernel_ready(key_of(plan, kernel), device, arch)),
            plan)) {
      return;
    }
  }
  if (!admitted(
          named(kOp, cuda::kernel_ready(
              cuda::AttentionBackwardRowDotKey{plan.dtype}, device, arch)),
          plan)) {
    return;
  }
  plan.family = KernelFamily::AttentionBackward;
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
  cu::Device& dev = cu::device(s.device);
  dev.make_current();
  const int device = dev.cuda_device();
  const int arch = cuda::arch_of(dev);
  cu::CommandEncoder& enc = cu::get_command_encoder(s);
  const fa::DType dtype = plan.dtype;
  const fa::AttnParams& p = plan.params;

  std::vector<mx::array> in;
  for (int i : {kBwdQ, kBwdK, kBwdV, kBwdOut}) {
    in.push_back(cuda::readable_rows(inputs[i], dtype, s, device, arch));
  }
  in.push_back(inputs[kBwdLse]);
  in.push_back(cuda::readable_rows(inputs[kBwdDout], dtype, s, device, arch));
  const bool has_mask = mask_index(plan.spec) >= 0;
  if (has_mask) {
    in.push_back(inputs[kBwdMask]);
  }
  mx::array d({p.B, p.H_q, p.L_q}, mx::float32, nullptr, {});
  cuda::set_device_data({&grads[0], &grads[1], &grads[2], &d}, s);
  const mx::array* lists = backward_lists(plan, inputs);
  fa::AttnBwdParams params = backward_launch_params(plan, in, grads, lists);
  const auto ptr = [](const mx::array& a) { return mx::gpu_ptr<void>(a); };
  const void* mask = has_mask ? ptr(in[kBwdMask]) : nullptr;
  const void* lists_ptr = lists != nullptr ? ptr(*lists) : nullptr;
  if (lists != nullptr) {
    in.push_back(*lists);
  }

  // ------------------------------------------------------------------- D
  enc.set_input_array(in[kBwdOut]);
  enc.set_input_array(in[kBwdDout]);
  enc.set_output_array(d);
  const cuda::AttentionBackwardRowDotKey row_dot{dtype};
  enc.add_kernel_node_ex(
      cuda::kernel_function(row_dot, device, arch),
      dim3(
          (p.L_q + fa::kBwdRowDotWarps - 1) / fa::kBwdRowDotWarps, p.H_q, p.B),
      dim3(row_dot.threads()),
      {},
      0,
      ptr(in[kBwdOut]),
      ptr(in[kBwdDout]),
      ptr(d),
      params);

  // --------------------------------------------------------- dK, dV, dQ
  for (const mx::array& a : in) {
    enc.set_input_array(a);
  }
  enc.set_input_array(d);
  enc.set_output_array(grads[1]);
  enc.set_output_array(grads[2]);
  // Not const: the encoder takes its kernel arguments by non-const address.
  fa::AttnFeatures dkdv_features =
      backward_kernel_features(plan, fa::BwdKernel::DkDv);
  const cuda::AttentionBackwardKernelKey dkdv =
      key_of(plan, fa::BwdKernel::DkDv);
  enc.add_kernel_node_ex(
      cuda::kernel_function(dkdv, device, arch),
      dim3((p.L_k + dkdv.tiles.bq - 1) / dkdv.tiles.bq, p.H_kv, p.B),
      dim3(dkdv.threads()),
      {},
      static_cast<uint32_t>(dkdv.smem_bytes()),
      ptr(in[kBwdQ]),
      ptr(in[kBwdK]),
      ptr(in[kBwdV]),
      ptr(in[kBwdDout]),
      ptr(in[kBwdLse]),
      ptr(d),
      ptr(grads[1]),
      ptr(grads[2]),
      params,
      mask,
      lists_ptr,
      dkdv_features);

  for (const mx::array& a : in) {
    enc.set_input_array(a);
  }
  enc.set_input_array(d);
  enc.set_output_array(grads[0]);
  fa::AttnFeatures dq_features =
      backward_kernel_features(plan, fa::BwdKernel::Dq);
  const cuda::AttentionBackwardKernelKey dq = key_of(plan, fa::BwdKernel::Dq);
  enc.add_kernel_node_ex(
      cuda::kernel_function(dq, device, arch),
      dim3((p.L_q + dq.tiles.bq - 1) / dq.tiles.bq, p.H_q, p.B),
      dim3(dq.threads()),
      {},
      static_cast<uint32_t>(dq.smem_bytes()),
      ptr(in[kBwdQ]),
      ptr(in[kBwdK]),
      ptr(in[kBwdV]),
      ptr(in[kBwdDout]),
      ptr(in[kBwdLse]),
      ptr(d),
      ptr(grads[0]),
      params,
      mask,
      lists_ptr,
      dq_features);
  enc.add_temporary(d);
}

} // namespace mlx_fused_attn::gpu
