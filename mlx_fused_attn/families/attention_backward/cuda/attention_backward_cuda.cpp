// The fused backward of the GPU interface (backend/gpu.h) on CUDA: its
// kernels built and its launch, three kernel nodes (attention_backward_kernel.cuh): D =
// rowsum(dO * O) into a temporary, then dK/dV and dQ, which read it. In the
// one-kernel form (the plan's tiles.dq_atomics) the row dot also zeroes an
// fp32 dQ accumulator, dK/dV adds dQ into it, and a conversion writes dQ.
//
// The LSE comes from the forward's general kernel (has_lse), so a call the
// forward runs with the short kernel keeps plain-op gradients.
#include <cuda_runtime.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <variant>

#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"
#include "mlx_fused_attn/backend/cuda/device_buffer.h"
#include "mlx_fused_attn/families/attention_backward/cuda/attention_backward_kernel_key.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_config.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_kernel_args.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] CUDA backward: ";

bool one_kernel(const AttentionPlan& plan) {
  return std::get<fa::AttnBwdTiles>(plan.tiles).dq_atomics;
}

cuda::AttentionBackwardKernelKey key_of(
    const AttentionPlan& plan,
    fa::BwdKernel kernel) {
  return {
      kernel,
      plan.dtype,
      plan.params.D,
      std::get<fa::AttnBwdTiles>(plan.tiles).of(kernel),
      plan.features.causal,
      plan.features.has_mask,
      kernel == fa::BwdKernel::DkDv && one_kernel(plan)};
}

} // namespace

Support prepare_backward(const AttentionPlan& plan, mx::Stream s) {
  cu::Device& d = cu::device(s.device);
  const int device = d.cuda_device();
  const int arch = cuda::arch_of(d);
  if (Support ready = cuda::kernel_ready(
          key_of(plan, fa::BwdKernel::DkDv), device, arch);
      !ready.ok) {
    return named(kOp, ready);
  }
  const Support dq = one_kernel(plan)
      ? cuda::kernel_ready(
            cuda::AttentionBackwardDqConvertKey{plan.dtype}, device, arch)
      : cuda::kernel_ready(key_of(plan, fa::BwdKernel::Dq), device, arch);
  if (!dq.ok) {
    return named(kOp, dq);
  }
  return named(
      kOp,
      cuda::kernel_ready(
          cuda::AttentionBackwardRowDotKey{plan.dtype}, device, arch));
}

namespace {

/// One backward run's launch: the encoder and device, the inputs as the
/// kernels read them ({q, k, v, o, lse, dO[, mask][, lists]}), D, the
/// parameters (not const: the encoder takes its kernel arguments by
/// non-const address), the optional inputs' device addresses and, in the
/// one-kernel form, the dQ accumulator (fp32 [B, H_q, L_q, D]).
struct BwdLaunch {
  cu::CommandEncoder& enc;
  int device;
  int arch;
  std::vector<mx::array> in;
  mx::array d;
  fa::AttnBwdParams params;
  const void* mask;
  const void* lists;
  std::optional<mx::array> dq_acc;
};

void* ptr(const mx::array& a) {
  return mx::gpu_ptr<void>(a);
}

void* acc_ptr(const BwdLaunch& at) {
  return at.dq_acc ? ptr(*at.dq_acc) : nullptr;
}

/// The row dot's and the conversion's grid: a warp a row.
dim3 row_grid(const fa::AttnParams& p) {
  return dim3(
      (p.L_q + fa::kBwdRowDotWarps - 1) / fa::kBwdRowDotWarps, p.H_q, p.B);
}

/// D = rowsum(dO * O), into the temporary d; the dQ accumulator's zeros.
void add_row_dot_node(const AttentionPlan& plan, BwdLaunch& at) {
  at.enc.set_input_array(at.in[kBwdOut]);
  at.enc.set_input_array(at.in[kBwdDout]);
  at.enc.set_output_array(at.d);
  if (at.dq_acc) {
    at.enc.set_output_array(*at.dq_acc);
  }
  const cuda::AttentionBackwardRowDotKey row_dot{plan.dtype};
  at.enc.add_kernel_node_ex(
      cuda::kernel_function(row_dot, at.device, at.arch),
      row_grid(plan.params),
      dim3(row_dot.threads()),
      {},
      0,
      ptr(at.in[kBwdOut]),
      ptr(at.in[kBwdDout]),
      ptr(at.d),
      acc_ptr(at),
      at.params);
}

/// dQ = scale * the accumulator, in the input type.
void add_dq_convert_node(
    const AttentionPlan& plan,
    std::vector<mx::array>& grads,
    BwdLaunch& at) {
  at.enc.set_input_array(*at.dq_acc);
  at.enc.set_output_array(grads[0]);
  const cuda::AttentionBackwardDqConvertKey convert{plan.dtype};
  at.enc.add_kernel_node_ex(
      cuda::kernel_function(convert, at.device, at.arch),
      row_grid(plan.params),
      dim3(convert.threads()),
      {},
      0,
      ptr(*at.dq_acc),
      ptr(grads[0]),
      at.params);
}

// The kernels read the struct as their own T's: float's layout is every
// T's (the struct's header says why).
static_assert(
    fa::kAttnBwdArgsMatchHost<float>,
    "AttnBwdKernelArgs<float> is laid out unlike the <void> form filled here");

/// The tiled kernels' argument struct with what both read: the inputs, D,
/// the parameters, the mask and its lists, and `kernel`'s features; each
/// kernel's gradients left null for its node to fill.
fa::AttnBwdKernelArgs<void> tiled_args(
    const AttentionPlan& plan,
    fa::BwdKernel kernel,
    const BwdLaunch& at) {
  fa::AttnBwdKernelArgs<void> args{};
  args.q = ptr(at.in[kBwdQ]);
  args.k = ptr(at.in[kBwdK]);
  args.v = ptr(at.in[kBwdV]);
  args.dout = ptr(at.in[kBwdDout]);
  args.lse = mx::gpu_ptr<float>(at.in[kBwdLse]);
  args.d = mx::gpu_ptr<float>(at.d);
  args.params = at.params;
  args.mask = static_cast<const unsigned char*>(at.mask);
  args.lists = static_cast<const unsigned int*>(at.lists);
  args.features = backward_kernel_features(plan, kernel);
  return args;
}

/// Registers every input and D as read by the next kernel.
void read_all(BwdLaunch& at) {
  for (const mx::array& a : at.in) {
    at.enc.set_input_array(a);
  }
  at.enc.set_input_array(at.d);
}

/// dK and dV, a block of keys a threadgroup (and dQ's sums into the
/// accumulator in the one-kernel form).
void add_dkdv_node(
    const AttentionPlan& plan,
    std::vector<mx::array>& grads,
    BwdLaunch& at) {
  const fa::AttnParams& p = plan.params;
  read_all(at);
  at.enc.set_output_array(grads[1]);
  at.enc.set_output_array(grads[2]);
  if (at.dq_acc) {
    at.enc.set_input_array(*at.dq_acc);
    at.enc.set_output_array(*at.dq_acc);
  }
  fa::AttnBwdKernelArgs<void> args =
      tiled_args(plan, fa::BwdKernel::DkDv, at);
  args.dk = ptr(grads[1]);
  args.dv = ptr(grads[2]);
  args.dq_acc = static_cast<float*>(acc_ptr(at));
  const cuda::AttentionBackwardKernelKey dkdv =
      key_of(plan, fa::BwdKernel::DkDv);
  at.enc.add_kernel_node_ex(
      cuda::kernel_function(dkdv, at.device, at.arch),
      dim3((p.L_k + dkdv.tiles.bq - 1) / dkdv.tiles.bq, p.H_kv, p.B),
      dim3(dkdv.threads()),
      {},
      static_cast<uint32_t>(dkdv.smem_bytes()),
      args);
}

/// dQ, a block of queries a threadgroup.
void add_dq_node(
    const AttentionPlan& plan,
    std::vector<mx::array>& grads,
    BwdLaunch& at) {
  const fa::AttnParams& p = plan.params;
  read_all(at);
  at.enc.set_output_array(grads[0]);
  fa::AttnBwdKernelArgs<void> args = tiled_args(plan, fa::BwdKernel::Dq, at);
  args.dq = ptr(grads[0]);
  const cuda::AttentionBackwardKernelKey dq = key_of(plan, fa::BwdKernel::Dq);
  at.enc.add_kernel_node_ex(
      cuda::kernel_function(dq, at.device, at.arch),
      dim3((p.L_q + dq.tiles.bq - 1) / dq.tiles.bq, p.H_q, p.B),
      dim3(dq.threads()),
      {},
      static_cast<uint32_t>(dq.smem_bytes()),
      args);
}

} // namespace

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
  std::optional<mx::array> dq_acc;
  std::vector<mx::array*> outputs = {&grads[0], &grads[1], &grads[2], &d};
  if (one_kernel(plan)) {
    dq_acc = mx::array({p.B, p.H_q, p.L_q, p.D}, mx::float32, nullptr, {});
    outputs.push_back(&*dq_acc);
  }
  cuda::set_device_data(outputs, s);
  const mx::array* lists = backward_lists(plan, inputs);
  BwdLaunch at{
      cu::get_command_encoder(s),
      device,
      arch,
      in,
      d,
      backward_launch_params(plan, in, grads, lists),
      has_mask ? ptr(in[kBwdMask]) : nullptr,
      lists != nullptr ? ptr(*lists) : nullptr,
      dq_acc};
  if (lists != nullptr) {
    at.in.push_back(*lists);
  }
  add_row_dot_node(plan, at);
  add_dkdv_node(plan, grads, at);
  if (at.dq_acc) {
    add_dq_convert_node(plan, grads, at);
    at.enc.add_temporary(*at.dq_acc);
  } else {
    add_dq_node(plan, grads, at);
  }
  at.enc.add_temporary(at.d);
}

} // namespace mlx_fused_attn::gpu
