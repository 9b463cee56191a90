// What every dispatch of the attention op's families on Metal shares (the
// inputs with rows the kernels read, the output made, the parameters with
// the strides, the buffers every family's kernel takes, the grid), and each
// family's own pipelines and dispatch, which its folder holds
// (families/<folder>/metal/<name>_metal.cpp): declared here from the
// registry's FA_ATTENTION_CANDIDATES, so that the backend
// (attention_metal.cpp) finds a family's prepare and run from its registry
// line.
#pragma once

#include <optional>
#include <vector>

#include "mlx/array.h"
#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/families/registry.h"
#include "mlx_fused_attn/plan/attention_plan.h"

namespace mlx_fused_attn::gpu {

/// The arrays of a call as the kernels read them: q, k, v and the sinks
/// with unit-stride rows (copied first where they have none), the mask and
/// its visit list as the primitive received them; and the kernel's
/// parameters with their strides.
struct AttentionBuffers {
  mlx::core::array q, k, v;
  std::optional<mlx::core::array> sinks;
  const mlx::core::array* mask = nullptr;
  const mlx::core::array* visits = nullptr;
  fa::AttnParams params{};
};

/// Whether the copies that attention_buffers may make (the strided copy
/// kernel's pipeline for `dtype`) build on `d`.
Support copies_ready(fa::DType dtype, mlx::core::metal::Device& d);

/// The buffers of `plan`'s run on `inputs` {q, k, v[, mask][, sinks][,
/// visits]} into `out`, whose memory is allocated here: copies are encoded
/// before the caller sets its kernel's pipeline.
AttentionBuffers attention_buffers(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    mlx::core::array& out,
    mlx::core::metal::Device& d,
    mlx::core::metal::CommandEncoder& enc);

/// Binds what every family's kernel takes: q, k, v, out, the parameters,
/// the mask and the sinks (buffers 0 to 6).
void bind_attention_buffers(
    const AttentionBuffers& b,
    mlx::core::array& out,
    mlx::core::metal::CommandEncoder& enc);

/// Dispatches the plan's grid, a simdgroup a warp.
void dispatch_grid(
    const AttentionPlan& plan,
    mlx::core::metal::CommandEncoder& enc);

/// Each attention candidate's dispatch, in its folder:
/// - prepare_<name>: whether the pipelines of a plan of the family build on
///   `d` and take their dispatch;
/// - run_<name>: the plan's dispatch, inputs and outputs as gpu::run takes
///   them.
#define FA_DECLARE_METAL_DISPATCH(e, name, tiles)              \
  Support prepare_##name(                                      \
      const AttentionPlan& plan, mlx::core::metal::Device& d); \
  void run_##name(                                             \
      const AttentionPlan& plan,                               \
      const std::vector<mlx::core::array>& inputs,             \
      std::vector<mlx::core::array>& outputs,                  \
      mlx::core::metal::Device& d,                             \
      mlx::core::metal::CommandEncoder& enc);
FA_ATTENTION_CANDIDATES(FA_DECLARE_METAL_DISPATCH)
#undef FA_DECLARE_METAL_DISPATCH

} // namespace mlx_fused_attn::gpu
