// The neighborhood half of the GPU interface (backend/gpu_na.h) on MLX's
// CUDA backend: the kernel of na_kernel.cuh (nvcc AOT or NVRTC, loaded by
// kernels.h like the attention kernels), launched through MLX's command
// encoder.
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"
#include "mlx_fused_attn/backend/cuda/device_buffer.h"
#include "mlx_fused_attn/families/neighborhood/cuda/na_kernel_key.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/backend/gpu_na.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

constexpr const char* kOp = "[neighborhood_attention] CUDA: ";

} // namespace

Support na_prepare(const NaPlan& plan, mx::Stream s) {
  cu::Device& d = cu::device(s.device);
  const int device = d.cuda_device();
  const int arch = cuda::arch_of(d);
  if (Support copies = cuda::copy_kernels_ready(plan.dtype, device, arch);
      !copies.ok) {
    return named(kOp, copies);
  }
  const cuda::NaKernelKey key{
      plan.dtype, plan.params.D, plan.params.n_axes, plan.tiles};
  return named(kOp, cuda::kernel_ready(key, device, arch));
}

void na_run(
    const NaPlan& plan,
    const std::vector<mx::array>& inputs,
    mx::array& out,
    mx::Stream s) {
  cu::Device& dev = cu::device(s.device);
  dev.make_current();
  const int device = dev.cuda_device();
  const int arch = cuda::arch_of(dev);
  cu::CommandEncoder& enc = cu::get_command_encoder(s);

  mx::array qkv[3] = {inputs[0], inputs[1], inputs[2]};
  for (mx::array& x : qkv) {
    x = cuda::readable_rows(x, plan.dtype, s, device, arch);
  }
  cuda::set_device_data(out, s);
  cuda::poison(out, enc, device, arch);
  // Not const: the encoder takes its kernel arguments by non-const address.
  fa::NaParams params = na_launch_params(plan, qkv[0], qkv[1], qkv[2], out);
  fa::NaGrid na_grid = plan.na_grid;
  const cuda::NaKernelKey key{
      plan.dtype, plan.params.D, plan.params.n_axes, plan.tiles};

  for (const mx::array& x : qkv) {
    enc.set_input_array(x);
  }
  enc.set_output_array(out);
  enc.add_kernel_node_ex(
      cuda::kernel_function(key, device, arch),
      dim3(plan.grid.x, plan.grid.y, plan.grid.z),
      dim3(plan.grid.warps * fa::kSimdWidth),
      {},
      static_cast<uint32_t>(plan.grid.smem_bytes),
      mx::gpu_ptr<void>(qkv[0]),
      mx::gpu_ptr<void>(qkv[1]),
      mx::gpu_ptr<void>(qkv[2]),
      mx::gpu_ptr<void>(out),
      params,
      na_grid);
}

} // namespace mlx_fused_attn::gpu
