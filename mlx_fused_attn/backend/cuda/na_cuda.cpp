// The neighborhood half of the GPU interface (backend/gpu_na.h) on MLX's
// CUDA backend: the kernel of na_kernel.cuh (nvcc AOT or NVRTC, loaded by
// kernels.h like the attention kernels), launched through MLX's command
// encoder.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/backend/cuda/device_buffer.h"
#include "mlx_fused_attn/backend/cuda/device_limits.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/backend/gpu_na.h"
#include "mlx_fused_attn/backend/na_launch.h"
#include "mlx_fused_attn/kernels/na_config.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

constexpr const char* kOp = "[neighborhood_attention] CUDA: ";
/// Grid limits of the y (heads) and z (batch) axes.
constexpr int kMaxGridYZ = 65535;

/// MLX_FUSED_ATTN_NA_RUN=n: 1-D threadgroups take runs of n tiles where the
/// kernel can (1: a tile each), whatever the device holds; read at every
/// call, so that tests can set it.
int run_override() {
  const char* env = std::getenv("MLX_FUSED_ATTN_NA_RUN");
  return env != nullptr ? std::atoi(env) : 0;
}

} // namespace

Support na_supports(const NaSpec& spec, const std::vector<mx::array>& inputs) {
  fa::DType dtype;
  Support covered = na_kernel_covers(kOp, inputs, &dtype);
  if (!covered.ok) {
    return covered;
  }
  const mx::array& q = inputs[0];
  const int B = q.shape(0);
  const int H = q.shape(-2);
  if (B > kMaxGridYZ || H > kMaxGridYZ) {
    std::ostringstream msg;
    msg << kOp << "batch " << B << " or heads " << H
        << " over the grid limit of " << kMaxGridYZ;
    return Support::no(msg.str());
  }
  cu::Device& d = cu::device(mx::Device(mx::Device::gpu, 0));
  if (Support s = cuda::device_supported(kOp, d); !s.ok) {
    return s;
  }
  const int D = q.shape(-1);
  const int smem = fa::na_smem_bytes(
      fa::choose_na_tiles(D, dtype, fa::Backend::Cuda, spec.n_axes),
      D,
      dtype,
      spec.n_axes);
  if (smem > cuda::max_smem_per_block(d.cuda_device())) {
    std::ostringstream msg;
    msg << kOp << "the kernel for head dim " << D << " and " << q.dtype()
        << " needs " << smem << " bytes of shared memory a block; this GPU "
        << "allows " << cuda::max_smem_per_block(d.cuda_device());
    return Support::no(msg.str());
  }
  const int device = d.cuda_device();
  const int arch = cuda::arch_of(d);
  if (Support copy = cuda::copy_kernels_ready(dtype, device, arch); !copy.ok) {
    return {false, kOp + copy.reason};
  }
  const cuda::NaKernelKey key{dtype, D, spec.n_axes};
  const Support ready = cuda::kernel_ready(key, device, arch);
  return ready.ok ? ready : Support::no(kOp + ready.reason);
}

void na_eval(
    const NaSpec& spec,
    const std::vector<mx::array>& inputs,
    mx::array& out,
    mx::Stream s) {
  fa::DType dtype;
  const Support covered = na_kernel_covers(kOp, inputs, &dtype);
  if (!covered.ok) {
    throw std::logic_error(
        std::string(kOp) + "internal error: eval of an uncovered call: " +
        covered.reason);
  }
  cu::Device& dev = cu::device(s.device);
  dev.make_current();
  const int device = dev.cuda_device();
  const int arch = cuda::arch_of(dev);
  cu::CommandEncoder& enc = cu::get_command_encoder(s);

  mx::array qkv[3] = {inputs[0], inputs[1], inputs[2]};
  for (mx::array& x : qkv) {
    x = cuda::readable_rows(x, dtype, enc, device, arch);
  }
  cuda::set_device_data(out, enc);
  cuda::poison(out, enc, device, arch);
  // Not const: the encoder takes its kernel arguments by non-const address.
  // 1-D runs of tiles: one round of threadgroups, min_blocks a
  // multiprocessor (choose_na_tiles sizes them to fit).
  const int head_dim = qkv[0].shape(-1);
  const fa::AttnTiles tiles =
      fa::choose_na_tiles(head_dim, dtype, fa::Backend::Cuda, spec.n_axes);
  const long long resident =
      fa::na_use_runs(head_dim, dtype, fa::Backend::Cuda, spec.n_axes)
      ? static_cast<long long>(cuda::multiprocessor_count(device)) *
          tiles.min_blocks
      : 0;
  NaLaunch l = na_launch(
      spec,
      fa::Backend::Cuda,
      dtype,
      qkv[0],
      qkv[1],
      qkv[2],
      out,
      resident,
      run_override());
  const cuda::NaKernelKey key{dtype, l.head_dim, l.n_axes};
  const int smem = fa::na_smem_bytes(l.tiles, l.head_dim, dtype, l.n_axes);

  for (const mx::array& x : qkv) {
    enc.set_input_array(x);
  }
  enc.set_output_array(out);
  enc.add_kernel_node_ex(
      cuda::kernel_function(key, device, arch),
      dim3(l.grid.blocks, l.params.H, l.params.B),
      dim3(l.tiles.warps * fa::kSimdWidth),
      {},
      static_cast<uint32_t>(smem),
      mx::gpu_ptr<void>(qkv[0]),
      mx::gpu_ptr<void>(qkv[1]),
      mx::gpu_ptr<void>(qkv[2]),
      mx::gpu_ptr<void>(out),
      l.params,
      l.grid);
}

} // namespace mlx_fused_attn::gpu
