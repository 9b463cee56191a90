// The interface every GPU backend (Metal, CUDA, or none) implements. Exactly
// one implementation is compiled into a build, chosen by CMake from the MLX
// backend the package is built against.
#pragma once

#include <string>
#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/attention_plan.h"
#include "mlx_fused_attn/backend/kernel_family.h"
#include "mlx_fused_attn/call.h"

namespace mlx_fused_attn::gpu {

/// Plans a validated call for its GPU stream's device: admits the dtype,
/// then sets `plan`'s family to the first of this backend's families
/// (short, then general) that can run it, or leaves the reason none can.
/// `plan` comes with the shapes, scale and mask features set.
void plan(const AttentionCall& call, AttentionPlan& plan);

/// Runs a plan that has a family on the GPU stream `s`; inputs are
/// {q, k, v[, mask][, sinks]} as the primitive receives them, outputs
/// {out[, lse]}: the row log-sum-exp (backward_params.h) only where the
/// fused backward will run (plan_backward said yes).
void run(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& outputs,
    mlx::core::Stream s);

/// Plans the fused backward of a validated call for its GPU stream's
/// device: family AttentionBackward, or the reason gradients run as plain
/// MLX ops. A yes also promises that `run` writes the forward's LSE. `plan`
/// comes with the shapes, scale and mask features set.
void plan_backward(const AttentionCall& call, AttentionPlan& plan);

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

} // namespace mlx_fused_attn::gpu
