// What every launch of the attention op's families on CUDA shares (the
// inputs as a kernel reads them, the outputs made and poisoned, the
// parameters with the strides, the kernel's node), and each family's own
// launch, which its folder holds (families/<folder>/cuda/<name>_cuda.cpp):
// declared here from the registry's FA_ATTENTION_CANDIDATES, so that the
// backend (attention_cuda.cpp) finds a family's prepare and run from its
// registry line.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "mlx/array.h"
#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/backend/cuda/split_partials.h"
#include "mlx_fused_attn/families/registry.h"
#include "mlx_fused_attn/plan/attention_plan.h"

namespace mlx_fused_attn::cuda {

/// Where a run launches: the stream, its device and its encoder.
struct Launch {
  mlx::core::Stream s;
  mlx::core::cu::CommandEncoder& enc;
  int device;
  int arch;
};

/// The arrays the kernel reads, as it reads them: q, k and v with rows it
/// can read (K and V as tensor maps read them, for a producer warpgroup),
/// the sinks contiguous, the mask and its visit list as the primitive
/// received them; and their device addresses, the absent ones null.
struct RunInputs {
  mlx::core::array q, k, v;
  std::optional<mlx::core::array> sinks;
  const mlx::core::array* mask = nullptr;
  const mlx::core::array* visits = nullptr;
  const void* mask_ptr = nullptr;
  const void* sinks_ptr = nullptr;
  const uint32_t* visits_ptr = nullptr;
};

/// A run as every family's launch starts it (start_run): its inputs read
/// and registered with the encoder, the outputs' buffers and any partials
/// of split keys made, the output poisoned and registered, and the
/// kernel's parameters with the strides of what it reads.
struct AttentionRun {
  RunInputs in;
  SplitPartials parts;
  fa::AttnParams params;
};

/// Starts the run of `plan` on `inputs` {q, k, v[, mask][, sinks][,
/// visits]} into `outputs` {out[, lse]}; `producer`: K and V are read
/// through tensor maps.
AttentionRun start_run(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    std::vector<mlx::core::array>& outputs,
    bool producer,
    const Launch& at);

/// Adds the plan's kernel `function` to the encoder's graph with the
/// arguments every family's kernel takes first (q, k, v, out, params, mask,
/// sinks, its features), then its own (`extra`).
template <typename Features, typename... Extra>
void add_attention_node(
    const Launch& at,
    CUfunction function,
    const AttentionPlan& plan,
    const AttentionRun& run,
    mlx::core::array& out,
    Features features,
    Extra... extra) {
  // The node copies its arguments from their addresses: lvalues it may
  // take them from.
  fa::AttnParams params = run.params;
  const void* mask = run.in.mask_ptr;
  const void* sinks = run.in.sinks_ptr;
  at.enc.add_kernel_node_ex(
      function,
      dim3(plan.grid.x, plan.grid.y, plan.grid.z),
      dim3(plan.grid.warps * fa::kSimdWidth),
      {},
      static_cast<uint32_t>(plan.grid.smem_bytes),
      mlx::core::gpu_ptr<void>(run.in.q),
      mlx::core::gpu_ptr<void>(run.in.k),
      mlx::core::gpu_ptr<void>(run.in.v),
      mlx::core::gpu_ptr<void>(out),
      params,
      mask,
      sinks,
      features,
      extra...);
}

/// Each attention candidate's launch, in its folder:
/// - prepare_<name>: whether the kernels of a plan of the family load on
///   `device` (compute capability `arch`) and take their launch;
/// - run_<name>: the plan's launch, inputs and outputs as gpu::run takes
///   them.
#define FA_DECLARE_CUDA_LAUNCH(e, name, tiles)                             \
  Support prepare_##name(const AttentionPlan& plan, int device, int arch); \
  void run_##name(                                                         \
      const AttentionPlan& plan,                                           \
      const std::vector<mlx::core::array>& inputs,                         \
      std::vector<mlx::core::array>& outputs,                              \
      const Launch& at);
FA_ATTENTION_CANDIDATES(FA_DECLARE_CUDA_LAUNCH)
#undef FA_DECLARE_CUDA_LAUNCH

} // namespace mlx_fused_attn::cuda
