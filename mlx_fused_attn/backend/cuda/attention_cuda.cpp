// The GPU interface (backend/gpu.h) on MLX's CUDA backend: the plan of a
// call (which kernel family runs it on the stream's device), and the plan's
// launch through MLX's command encoder (a node of the encoder's CUDA graph,
// ordered after the nodes that write its inputs).
//
// Kernels come from nvcc (AOT, built into this library for sm_80 and sm_90)
// or from NVRTC (JIT) when MLX_FUSED_ATTN_JIT=1 or the build has no AOT
// kernels (kernels.h). fp32 runs the same kernel with 3xTF32 products
// (tile/mma_frag.h): fp32 accuracy from the tensor cores.
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/backend/cuda/device_buffer.h"
#include "mlx_fused_attn/backend/cuda/device_limits.h"
#include "mlx_fused_attn/backend/cuda/kernel_families.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/backend/cuda/short_attention_cuda.h"
#include "mlx_fused_attn/backend/cuda/tensor_map.h"
#include "mlx_fused_attn/backend/attention_covers.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/kernels/attention_kernel_name.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] CUDA: ";
/// Grid limits of the y (heads) and z (batch) axes.
constexpr int kMaxGridYZ = 65535;

/// The general kernel of a plan with its tiles.
cuda::AttentionKernelKey general_key(const AttentionPlan& plan) {
  return {
      plan.dtype,
      plan.params.D,
      plan.params.D_v,
      std::get<fa::AttnTiles>(plan.tiles),
      plan.features.causal,
      plan.features.has_mask};
}

Support smem_fits(const char* kernel, const AttentionPlan& plan, int device) {
  const int allowed = cuda::max_smem_per_block(device);
  if (plan.grid.smem_bytes <= allowed) {
    return Support::yes();
  }
  std::ostringstream msg;
  msg << kOp << "the " << kernel << " for head dims " << plan.params.D
      << " (q, k) and " << plan.params.D_v << " (v) and "
      << fa::dtype_name(plan.dtype) << " needs " << plan.grid.smem_bytes
      << " bytes of shared memory a block; this GPU allows " << allowed;
  return Support::no(msg.str());
}

/// Where a call is planned: the stream's device.
struct CudaTarget {
  int device;
  int arch;
};

Support plan_short(const CudaTarget& target, AttentionPlan& plan) {
  if (Support covered = plan_short_launch(plan, fa::Backend::Cuda);
      !covered.ok) {
    return covered;
  }
  if (Support fits = smem_fits("short kernel", plan, target.device); !fits.ok) {
    return fits;
  }
  return named(kOp, cuda::short_attention_ready(plan, target.device, target.arch));
}

Support plan_general(const CudaTarget& target, AttentionPlan& plan) {
  const fa::AttnParams& p = plan.params;
  if (p.B > kMaxGridYZ || p.H_q > kMaxGridYZ) {
    std::ostringstream msg;
    msg << kOp << "batch " << p.B << " or query heads " << p.H_q
        << " over the grid limit of " << kMaxGridYZ;
    return Support::no(msg.str());
  }
  const int sms = cuda::multiprocessor_count(target.device);
  plan_general_launch(
      plan, fa::Backend::Cuda, cuda::has_wgmma(target.arch), sms, sms);
  if (Support fits = smem_fits("kernel", plan, target.device); !fits.ok) {
    return fits;
  }
  if (plan.key_splits > 1) {
    if (Support ready = cuda::kernel_ready(
            cuda::SplitCombineKernelKey{plan.dtype}, target.device,
            target.arch);
        !ready.ok) {
      return named(kOp, ready);
    }
  }
  return named(kOp, cuda::kernel_ready(general_key(plan), target.device, target.arch));
}

/// The families in order of preference: short sequences run the short
/// kernel (short_attention_covers), whose grid is one axis of sequences;
/// all others the general one.
const FamilyCandidate<AttentionPlan, CudaTarget> kFamilies[] = {
    {KernelFamily::ShortAttention, plan_short},
    {KernelFamily::Attention, plan_general},
};

/// An fp32 array of `n` elements, its buffer not yet made
/// (set_device_data).
mx::array unmade_floats(int64_t n) {
  return mx::array({static_cast<int>(n)}, mx::float32, nullptr, {});
}

/// Merges the partials of a plan with split keys into `out`.
void add_combine_node(
    cu::CommandEncoder& enc,
    const AttentionPlan& plan,
    fa::AttnParams params,
    const mx::array& o_part,
    const mx::array& stats,
    mx::array& out,
    int device,
    int arch) {
  const int inner = params.L_q * params.D_v;
  int n_splits = plan.key_splits;
  enc.set_input_array(o_part);
  enc.set_input_array(stats);
  enc.set_output_array(out);
  enc.add_kernel_node_ex(
      cuda::kernel_function(
          cuda::SplitCombineKernelKey{plan.dtype}, device, arch),
      dim3((inner + fa::kSplitCombineThreads - 1) / fa::kSplitCombineThreads,
           params.H_q,
           params.B),
      dim3(fa::kSplitCombineThreads),
      {},
      0,
      mx::gpu_ptr<float>(o_part),
      mx::gpu_ptr<float>(stats),
      mx::gpu_ptr<void>(out),
      params,
      n_splits);
}

/// Adds the plan's kernel `function` to the encoder's graph; both families
/// take these arguments, each with its own features, and the general one
/// also where split keys write, the LSE goes and the mask's classes by
/// block are, and with a producer warpgroup the tensor maps of K and V
/// (`extra`).
template <typename Features, typename... Extra>
void add_attention_node(
    cu::CommandEncoder& enc,
    CUfunction function,
    const AttentionPlan& plan,
    fa::AttnParams params,
    const mx::array& q,
    const mx::array& k,
    const mx::array& v,
    mx::array& out,
    const void* mask,
    const void* sinks,
    Features features,
    Extra... extra) {
  enc.add_kernel_node_ex(
      function,
      dim3(plan.grid.x, plan.grid.y, plan.grid.z),
      dim3(plan.grid.warps * fa::kSimdWidth),
      {},
      static_cast<uint32_t>(plan.grid.smem_bytes),
      mx::gpu_ptr<void>(q),
      mx::gpu_ptr<void>(k),
      mx::gpu_ptr<void>(v),
      mx::gpu_ptr<void>(out),
      params,
      mask,
      sinks,
      features,
      extra...);
}

} // namespace

void plan(const AttentionCall& call, AttentionPlan& plan) {
  if (!admitted(attention_kernel_covers(kOp, call.inputs, plan), plan)) {
    return;
  }
  cu::Device& d = cu::device(call.stream.device);
  if (!admitted(cuda::device_supported(kOp, d), plan)) {
    return;
  }
  const CudaTarget target{d.cuda_device(), cuda::arch_of(d)};
  if (admitted(
          named(kOp, cuda::copy_kernels_ready(
              plan.dtype, target.device, target.arch)),
          plan)) {
    choose_family(kFamilies, target, plan);
  }
}

BackendInfo backend_info() {
#ifdef MLX_FUSED_ATTN_HAS_CUDA_AOT
  const bool aot = true;
#else
  const bool aot = false;
#endif
  // The backward's row dot is part of the attention_backward family here.
  return {
      "cuda",
      aot,
      cuda::use_jit(),
      {KernelFamily::Attention,
       KernelFamily::ShortAttention,
       KernelFamily::AttentionBackward,
       KernelFamily::Neighborhood,
       KernelFamily::Copy}};
}

void run(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    mx::Stream s) {
  mx::array& out = outputs[0];
  cu::Device& dev = cu::device(s.device);
  dev.make_current();
  const int device = dev.cuda_device();
  const int arch = cuda::arch_of(dev);
  cu::CommandEncoder& enc = cu::get_command_encoder(s);

  const fa::DType dtype = plan.dtype;
  const int mi = mask_index(plan.spec), si = sinks_index(plan.spec);
  const int vi = visits_index(plan);
  // A producer warpgroup copies K and V through tensor maps.
  const bool producer = plan.family == KernelFamily::Attention &&
      std::get<fa::AttnTiles>(plan.tiles).producer;
  const auto kv_rows = producer ? cuda::tensor_map_rows : cuda::readable_rows;
  const mx::array q = cuda::readable_rows(inputs[0], dtype, s, device, arch);
  const mx::array k = kv_rows(inputs[1], dtype, s, device, arch);
  const mx::array v = kv_rows(inputs[2], dtype, s, device, arch);
  // Sinks are read as sinks[head]: a strided view is copied.
  std::optional<mx::array> sinks;
  if (si >= 0) {
    sinks = needs_row_copy(inputs[si])
        ? cuda::contiguous_copy(inputs[si], dtype, s, device, arch)
        : inputs[si];
  }
  // The backward's LSE, where the primitive asked for it (outputs[1]); a
  // plan that saves it has no split keys (plan_general_launch).
  fa::AttnFeatures features = plan.features;
  features.has_lse = outputs.size() > 1;
  if (features.has_lse && plan.key_splits > 1) {
    throw std::logic_error(
        "[FusedAttention] internal error: split keys with the LSE");
  }
  // Split keys: the kernel writes partials, which the combine merges;
  // they are temporaries, kept until the encoder's graph has run.
  std::optional<mx::array> o_part, stats;
  std::vector<mx::array*> buffers = {&out};
  if (features.has_lse) {
    buffers.push_back(&outputs[1]);
  }
  if (plan.key_splits > 1) {
    o_part = unmade_floats(split_rows(plan) * plan.params.D_v);
    stats = unmade_floats(2 * split_rows(plan));
    buffers.push_back(&*o_part);
    buffers.push_back(&*stats);
  }
  // Every buffer at once (one node, not one each), before the first
  // set_*_array: set_device_data adds a node of its own, which would take
  // the dependencies registered for the next.
  cuda::set_device_data(buffers, s);
  float* lse = features.has_lse ? mx::gpu_ptr<float>(outputs[1]) : nullptr;
  float* o_part_ptr = nullptr;
  float* stats_ptr = nullptr;
  if (o_part) {
    enc.add_temporary(*o_part);
    enc.add_temporary(*stats);
    o_part_ptr = mx::gpu_ptr<float>(*o_part);
    stats_ptr = mx::gpu_ptr<float>(*stats);
  }
  cuda::poison(out, enc, device, arch);

  const mx::array* mask = mi >= 0 ? &inputs[mi] : nullptr;
  const mx::array* visits = vi >= 0 ? &inputs[vi] : nullptr;
  const fa::AttnParams params =
      launch_params(plan, q, k, v, out, mask, visits);
  const void* mask_ptr = nullptr;
  if (mask != nullptr) {
    mask_ptr = mx::gpu_ptr<void>(*mask);
    enc.set_input_array(*mask);
  }
  const uint32_t* visits_ptr = nullptr;
  if (visits != nullptr) {
    visits_ptr = mx::gpu_ptr<uint32_t>(*visits);
    enc.set_input_array(*visits);
  }
  const void* sinks_ptr = nullptr;
  if (sinks) {
    sinks_ptr = mx::gpu_ptr<void>(*sinks);
    enc.set_input_array(*sinks);
  }
  enc.set_input_array(q);
  enc.set_input_array(k);
  enc.set_input_array(v);
  enc.set_output_array(out);

  if (plan.family == KernelFamily::ShortAttention) {
    add_attention_node(
        enc, cuda::short_attention_function(plan, device, arch), plan, params,
        q, k, v, out, mask_ptr, sinks_ptr, short_features(plan.features));
    return;
  }
  if (lse != nullptr) {
    enc.set_output_array(outputs[1]);
  }
  if (o_part) {
    enc.set_output_array(*o_part);
    enc.set_output_array(*stats);
  }
  const CUfunction function =
      cuda::kernel_function(general_key(plan), device, arch);
  if (producer) {
    const int rows = std::get<fa::AttnTiles>(plan.tiles).bk;
    add_attention_node(
        enc, function, plan, params, q, k, v, out, mask_ptr, sinks_ptr,
        features, o_part_ptr, stats_ptr, plan.key_splits, lse, visits_ptr,
        cuda::panel_tensor_map(k, dtype, rows),
        cuda::panel_tensor_map(v, dtype, rows));
  } else {
    add_attention_node(
        enc, function, plan, params, q, k, v, out, mask_ptr, sinks_ptr,
        features, o_part_ptr, stats_ptr, plan.key_splits, lse, visits_ptr);
  }
  if (o_part) {
    add_combine_node(enc, plan, params, *o_part, *stats, out, device, arch);
  }
}

} // namespace mlx_fused_attn::gpu
