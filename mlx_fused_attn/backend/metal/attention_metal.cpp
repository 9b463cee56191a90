// The GPU interface (backend/gpu.h) on Metal: the caps of a stream's
// device, the pipelines of a plan built, and the plan's dispatch through
// MLX's Metal device and command encoder. Each family of the attention op
// builds and dispatches its own pipelines (its folder's
// metal/<name>_metal.cpp, attention_dispatch.h), found from its registry
// line.
//
// Kernels come from their family's library (kernel_library.h). prepare
// builds the pipeline a call will use and checks it against the dispatch,
// so that a kernel that cannot run makes the call fall back before its
// graph exists; MLX's Device caches the libraries and pipelines for eval.
#include <stdexcept>
#include <vector>

#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/metal/attention_dispatch.h"
#include "mlx_fused_attn/families/attention/metal/attention_variant.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] Metal: ";

/// The GPU cores whose wave split keys fill. Neither Metal nor MLX reports
/// a core count; Apple's GPUs have 8 (M1) to 80 (M3 Ultra), and 32 splits
/// decode finely on all of them while keeping a split's keys long.
constexpr int kMetalGpuCores = 32;

/// An attention candidate's dispatch on Metal (attention_dispatch.h).
struct FamilyDispatch {
  KernelFamily family;
  decltype(&prepare_attention) prepare;
  decltype(&run_attention) run;
};

const FamilyDispatch kDispatches[] = {
#define FA_FAMILY_DISPATCH(e, name, tiles) \
  {KernelFamily::e, prepare_##name, run_##name},
    FA_ATTENTION_CANDIDATES(FA_FAMILY_DISPATCH)
#undef FA_FAMILY_DISPATCH
};

/// The dispatch of the family of a plan that has one.
const FamilyDispatch& dispatch_of(const AttentionPlan& plan) {
  for (const FamilyDispatch& dispatch : kDispatches) {
    if (plan.family == dispatch.family) {
      return dispatch;
    }
  }
  throw std::logic_error(
      "[FusedAttention] internal error: the plan's family does not run the "
      "attention op");
}

} // namespace

DeviceCaps device_caps(mx::Stream) {
  DeviceCaps caps;
  caps.gpu = fa::Backend::Metal;
  caps.name = "Metal";
  caps.cores = kMetalGpuCores;
  // A variable that names no variant raises on every call.
  caps.metal_variant = metal_variant_from_env();
  return caps;
}

Support prepare(const AttentionPlan& plan, mx::Stream s) {
  auto& d = mx::metal::device(s.device);
  // Strided q, k, v and sinks are copied first (attention_buffers), and
  // whether they are is known only at eval.
  if (Support ready = copies_ready(plan.dtype, d); !ready.ok) {
    return named(kOp, ready);
  }
  return named(kOp, dispatch_of(plan).prepare(plan, d));
}

void run(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    mx::Stream s) {
  auto& d = mx::metal::device(s.device);
  auto& enc = mx::metal::get_command_encoder(s);
  dispatch_of(plan).run(plan, inputs, outputs, d, enc);
}

} // namespace mlx_fused_attn::gpu
