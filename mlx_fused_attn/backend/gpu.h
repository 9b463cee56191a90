// The interface every GPU backend (Metal, CUDA, or none) implements. Exactly
// one implementation is compiled into a build, chosen by CMake from the MLX
// backend the package is built against.
#pragma once

#include <string>
#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn::gpu {

/// Whether this build's GPU kernels cover the call. Shapes and dtypes are
/// already validated by the op; inputs are {q, k, v[, mask][, sinks]} as the
/// primitive receives them (mask broadcast to [B, H_q, L_q, L_k]).
Support supports(
    const AttentionSpec& spec,
    const std::vector<mlx::core::array>& inputs);

/// Runs the fused kernel on the GPU stream `s`; called from
/// FusedAttention::eval_gpu only when supports() said yes.
void eval(
    const AttentionSpec& spec,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    mlx::core::Stream s);

/// This build's GPU backend, for build_info and the selftest.
struct BackendInfo {
  std::string name; ///< "metal", "cuda" or "none"
  bool aot; ///< kernels built ahead of time (metallibs, nvcc objects)
  bool jit; ///< kernels compiled at run time now (MLX_FUSED_ATTN_JIT=1, or no AOT)
};
BackendInfo backend_info();

} // namespace mlx_fused_attn::gpu
