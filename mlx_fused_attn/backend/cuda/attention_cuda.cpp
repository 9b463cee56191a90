// The GPU interface (backend/gpu.h) on MLX's CUDA backend: the caps of a
// stream's device, the kernels of a plan built, and the plan's launch
// through MLX's command encoder (a node of the encoder's CUDA graph,
// ordered after the nodes that write its inputs).
//
// Kernels come from nvcc (AOT, built into this library for sm_80 and sm_90)
// or from NVRTC (JIT) when MLX_FUSED_ATTN_JIT=1 or the build has no AOT
// kernels (kernels.h). fp32 runs the same kernel with 3xTF32 products
// (tile/mma_frag.h): fp32 accuracy from the tensor cores.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/backend/cuda/device_limits.h"
#include "mlx_fused_attn/families/attention/cuda/attention_kernel_key.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/families/short_attention/cuda/short_attention_cuda.h"
#include "mlx_fused_attn/backend/cuda/split_partials.h"
#include "mlx_fused_attn/backend/cuda/tensor_map.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/kernels/attention_kernel_name.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] CUDA: ";
/// Grid limits of the y (heads) and z (batch) axes.
constexpr int kMaxGridYZ = 65535;

/// MLX_FUSED_ATTN_NA_RUN=n: 1-D neighborhood threadgroups take runs of n
/// tiles where the kernel can (1: a tile each), whatever the device holds;
/// read at every call, so that tests can set it.
int na_run_override() {
  const char* env = std::getenv("MLX_FUSED_ATTN_NA_RUN");
  return env != nullptr ? std::atoi(env) : 0;
}

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

DeviceCaps device_caps(mx::Stream s) {
  cu::Device& d = cu::device(s.device);
  const int device = d.cuda_device();
  DeviceCaps caps;
  caps.gpu = fa::Backend::Cuda;
  caps.name = "CUDA";
  caps.refusal = cuda::device_supported("", d).reason;
  caps.cores = cuda::multiprocessor_count(device);
  caps.sm_count = caps.cores;
  caps.max_smem_bytes = cuda::max_smem_per_block(device);
  caps.max_grid_yz = kMaxGridYZ;
  caps.wgmma = cuda::has_wgmma(cuda::arch_of(d));
  caps.na_run_override = na_run_override();
  return caps;
}

Support prepare(const AttentionPlan& plan, mx::Stream s) {
  cu::Device& d = cu::device(s.device);
  const int device = d.cuda_device();
  const int arch = cuda::arch_of(d);
  if (Support copies = cuda::copy_kernels_ready(plan.dtype, device, arch);
      !copies.ok) {
    return named(kOp, copies);
  }
  if (plan.family == KernelFamily::ShortAttention) {
    return named(kOp, cuda::short_attention_ready(plan, device, arch));
  }
  if (plan.key_splits > 1 && !plan.split_merge) {
    if (Support ready = cuda::kernel_ready(
            cuda::SplitCombineKernelKey{plan.dtype}, device, arch);
        !ready.ok) {
      return named(kOp, ready);
    }
  }
  return named(kOp, cuda::kernel_ready(general_key(plan), device, arch));
}

BackendInfo backend_info() {
#ifdef MLX_FUSED_ATTN_HAS_CUDA_AOT
  const bool aot = true;
#else
  const bool aot = false;
#endif
  // The backward's row dot is part of the attention_backward family here.
  return {"cuda", aot, cuda::use_jit(), cuda_kernel_families()};
}

namespace {

/// Where a run launches: the stream, its device and its encoder.
struct Launch {
  mx::Stream s;
  cu::CommandEncoder& enc;
  int device;
  int arch;
};

/// The arrays the kernel reads, as it reads them: q, k and v with rows it
/// can read (K and V as tensor maps read them, for a producer warpgroup),
/// the sinks contiguous, the mask and its visit list as the primitive
/// received them; and their device addresses, the absent ones null.
struct RunInputs {
  mx::array q, k, v;
  std::optional<mx::array> sinks;
  const mx::array* mask = nullptr;
  const mx::array* visits = nullptr;
  const void* mask_ptr = nullptr;
  const void* sinks_ptr = nullptr;
  const uint32_t* visits_ptr = nullptr;
};

RunInputs run_inputs(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    bool producer,
    const Launch& at) {
  const auto kv_rows = producer ? cuda::tensor_map_rows : cuda::readable_rows;
  const CallInputs call = call_inputs(plan.spec, inputs, plan.visits_input);
  RunInputs in{
      cuda::readable_rows(call.q, plan.dtype, at.s, at.device, at.arch),
      kv_rows(call.k, plan.dtype, at.s, at.device, at.arch),
      kv_rows(call.v, plan.dtype, at.s, at.device, at.arch)};
  // Sinks are read as sinks[head]: a strided view is copied.
  if (call.sinks != nullptr) {
    in.sinks = needs_row_copy(*call.sinks)
        ? cuda::contiguous_copy(
              *call.sinks, plan.dtype, at.s, at.device, at.arch)
        : *call.sinks;
  }
  in.mask = call.mask;
  in.visits = call.visits;
  return in;
}

/// Registers the reads of `in` with the encoder and takes the optional
/// ones' device addresses.
void read_inputs(RunInputs& in, cu::CommandEncoder& enc) {
  if (in.mask != nullptr) {
    in.mask_ptr = mx::gpu_ptr<void>(*in.mask);
    enc.set_input_array(*in.mask);
  }
  if (in.visits != nullptr) {
    in.visits_ptr = mx::gpu_ptr<uint32_t>(*in.visits);
    enc.set_input_array(*in.visits);
  }
  if (in.sinks) {
    in.sinks_ptr = mx::gpu_ptr<void>(*in.sinks);
    enc.set_input_array(*in.sinks);
  }
  enc.set_input_array(in.q);
  enc.set_input_array(in.k);
  enc.set_input_array(in.v);
}

} // namespace

void run(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    mx::Stream s) {
  mx::array& out = outputs[0];
  cu::Device& dev = cu::device(s.device);
  dev.make_current();
  const Launch at{
      s, cu::get_command_encoder(s), dev.cuda_device(), cuda::arch_of(dev)};
  // A producer warpgroup copies K and V through tensor maps.
  const bool producer = plan.family == KernelFamily::Attention &&
      std::get<fa::AttnTiles>(plan.tiles).producer;
  RunInputs in = run_inputs(plan, inputs, producer, at);
  // The backward's LSE, where the primitive asked for it (outputs[1]); a
  // plan that saves it splits keys only where the last split merges
  // (plan_general_launch).
  fa::AttnFeatures features = plan.features;
  features.has_lse = outputs.size() > 1;
  if (features.has_lse && plan.key_splits > 1 && !plan.split_merge) {
    throw std::logic_error(
        "[FusedAttention] internal error: split keys with the LSE");
  }
  std::vector<mx::array*> made = {&outputs[0]};
  if (features.has_lse) {
    made.push_back(&outputs[1]);
  }
  const cuda::SplitPartials parts =
      cuda::make_buffers(
          made, plan.key_splits, cuda::merged_tiles(plan), plan.params, at.s,
          at.enc);
  float* lse = features.has_lse ? mx::gpu_ptr<float>(outputs[1]) : nullptr;
  cuda::poison(out, at.enc, at.device, at.arch);

  const fa::AttnParams params =
      launch_params(plan, in.q, in.k, in.v, out, in.mask, in.visits);
  read_inputs(in, at.enc);
  at.enc.set_output_array(out);
  if (plan.family == KernelFamily::ShortAttention) {
    add_attention_node(
        at.enc, cuda::short_attention_function(plan, at.device, at.arch),
        plan, params, in.q, in.k, in.v, out, in.mask_ptr, in.sinks_ptr,
        short_features(plan.features));
    return;
  }
  if (lse != nullptr) {
    at.enc.set_output_array(outputs[1]);
  }
  if (parts.o_part) {
    at.enc.set_output_array(*parts.o_part);
    at.enc.set_output_array(*parts.stats);
  }
  // After the node that zeroes them.
  if (parts.counters) {
    at.enc.set_output_array(*parts.counters);
  }
  const CUfunction function =
      cuda::kernel_function(general_key(plan), at.device, at.arch);
  if (producer) {
    const int rows = std::get<fa::AttnTiles>(plan.tiles).bk;
    add_attention_node(
        at.enc, function, plan, params, in.q, in.k, in.v, out, in.mask_ptr,
        in.sinks_ptr, features, parts.o_part_ptr, parts.stats_ptr,
        parts.counters_ptr, plan.key_splits, lse, in.visits_ptr,
        cuda::panel_tensor_map(in.k, plan.dtype, rows),
        cuda::panel_tensor_map(in.v, plan.dtype, rows));
  } else {
    add_attention_node(
        at.enc, function, plan, params, in.q, in.k, in.v, out, in.mask_ptr,
        in.sinks_ptr, features, parts.o_part_ptr, parts.stats_ptr,
        parts.counters_ptr, plan.key_splits, lse, in.visits_ptr);
  }
  if (parts.o_part && !plan.split_merge) {
    cuda::add_combine_node(
        at.enc,
        cuda::kernel_function(
            cuda::SplitCombineKernelKey{plan.dtype}, at.device, at.arch),
        params, plan.key_splits, parts, out);
  }
}

} // namespace mlx_fused_attn::gpu
