// The interface every GPU backend (Metal, CUDA, or none) implements. Exactly
// one implementation is compiled into a build, chosen by CMake from the MLX
// backend the package is built against.
#pragma once

#include <string>
#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/plan/attention_plan.h"
#include "mlx_fused_attn/plan/device_caps.h"
#include "mlx_fused_attn/plan/kernel_family.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn::gpu {

/// What the planners may know of the device of the GPU stream `s`.
DeviceCaps device_caps(mlx::core::Stream s);

/// Builds (or finds) every kernel a plan that has a family runs on the
/// device of `s`, before the graph exists; a no names the kernel and why,
/// and the call then plans without that family (call_plans.h).
Support prepare(const AttentionPlan& plan, mlx::core::Stream s);

/// Runs a plan that has a family on the GPU stream `s`; inputs are
/// {q, k, v[, mask][, sinks]} as the primitive receives them, outputs
/// {out[, lse]}: the row log-sum-exp (backward_params.h) only where the
/// fused backward will run (its plan has a family).
void run(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& outputs,
    mlx::core::Stream s);

/// Builds (or finds) the kernels of a backward plan on the device of `s`,
/// as prepare does for the forward.
Support prepare_backward(const AttentionPlan& plan, mlx::core::Stream s);

/// Runs a backward plan on the GPU stream `s`: inputs {q, k, v, o, lse,
/// dO[, mask]} (BackwardInput, call.h), grads {dq, dk, dv} to allocate and
/// fill, in the dtype of q (dK and dV summed over each GQA group).
void run_backward(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& grads,
    mlx::core::Stream s);

/// This build's GPU backend, for build_info and the selftest.
struct BackendInfo {
  std::string name; ///< "metal", "cuda" or "none"
  bool aot; ///< kernels built ahead of time (metallibs, nvcc objects)
  bool jit; ///< kernels compiled at run time now (MLX_FUSED_ATTN_JIT=1, or no AOT)
  std::vector<KernelFamily> families; ///< the kernel families this backend has
};
BackendInfo backend_info();

/// What holds the memory of the evaluated array `a`: on CUDA "device",
/// "managed" or "host" as the runtime reports it ("unregistered" for none of
/// these), on Metal "unified", without a GPU backend "host". The CUDA backend
/// keeps its outputs in device memory (cuda/device_buffer.h); tests ask here.
std::string memory_kind(const mlx::core::array& a);

} // namespace mlx_fused_attn::gpu
