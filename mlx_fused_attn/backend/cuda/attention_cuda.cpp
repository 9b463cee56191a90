// The GPU interface (backend/gpu.h) on MLX's CUDA backend: the caps of a
// stream's device, the kernels of a plan built, and the plan's launch
// through MLX's command encoder (a node of the encoder's CUDA graph,
// ordered after the nodes that write its inputs). Each family of the
// attention op builds and launches its own kernels (its folder's
// cuda/<name>_cuda.cpp, attention_launch.h), found from its registry line.
//
// Kernels come from nvcc (AOT, built into this library for sm_80 and sm_90)
// or from NVRTC (JIT) when MLX_FUSED_ATTN_JIT=1 or the build has no AOT
// kernels (kernels.h). fp32 runs the same kernel with 3xTF32 products
// (tile/mma_frag.h): fp32 accuracy from the tensor cores.
#include <cuda_runtime.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "mlx/backend/cuda/device.h"
#include "mlx_fused_attn/backend/cuda/attention_launch.h"
#include "mlx_fused_attn/backend/cuda/device_limits.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/backend/gpu.h"

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

/// An attention candidate's launch on CUDA (attention_launch.h).
struct FamilyLaunch {
  KernelFamily family;
  decltype(&cuda::prepare_attention) prepare;
  decltype(&cuda::run_attention) run;
};

const FamilyLaunch kLaunches[] = {
#define FA_FAMILY_LAUNCH(e, name, tiles) \
  {KernelFamily::e, cuda::prepare_##name, cuda::run_##name},
    FA_ATTENTION_CANDIDATES(FA_FAMILY_LAUNCH)
#undef FA_FAMILY_LAUNCH
};

/// The launch of the family of a plan that has one.
const FamilyLaunch& launch_of(const AttentionPlan& plan) {
  for (const FamilyLaunch& launch : kLaunches) {
    if (plan.family == launch.family) {
      return launch;
    }
  }
  throw std::logic_error(
      "[FusedAttention] internal error: the plan's family does not run the "
      "attention op");
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
  return named(kOp, launch_of(plan).prepare(plan, device, arch));
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

void run(
    const AttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    mx::Stream s) {
  cu::Device& dev = cu::device(s.device);
  dev.make_current();
  const cuda::Launch at{
      s, cu::get_command_encoder(s), dev.cuda_device(), cuda::arch_of(dev)};
  launch_of(plan).run(plan, inputs, outputs, at);
}

} // namespace mlx_fused_attn::gpu
