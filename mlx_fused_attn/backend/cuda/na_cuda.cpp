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
#include "mlx/backend/gpu/copy.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/backend/cuda/block_sizes.h"
#include "mlx_fused_attn/backend/cuda/device_buffer.h"
#include "mlx_fused_attn/backend/cuda/device_limits.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/na_names.h"
#include "mlx_fused_attn/backend/gpu_na.h"
#include "mlx_fused_attn/backend/na_launch.h"
#include "mlx_fused_attn/backend/poison.h"
#include "mlx_fused_attn/kernels/na_config.h"
#include "mlx_fused_attn/kernels/strided_copy_params.h"
#ifdef MLX_FUSED_ATTN_HAS_CUDA_AOT
#include "mlx_fused_attn/backend/cuda/na_aot.h"
#endif

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

constexpr const char* kOp = "[neighborhood_attention] CUDA: ";
/// Grid limits of the y (heads) and z (batch) axes.
constexpr int kMaxGridYZ = 65535;
/// cp.async copies and the fragments' paired loads and stores take rows
/// that start on 16 bytes.
constexpr int kRowAlignment = 16;

/// The nvcc-built kernel for `key`, nullptr in a build without them.
const void* aot_na_kernel(const cuda::NaKernelKey& key) {
#ifdef MLX_FUSED_ATTN_HAS_CUDA_AOT
  switch (key.n_axes) {
#define FA_NA_AOT_CASE(n) \
  case n:                 \
    return cuda::aot_na_kernel_n##n(key.dtype, key.head_dim);
    FA_NA_AXES(FA_NA_AOT_CASE)
#undef FA_NA_AOT_CASE
  }
#endif
  (void)key;
  return nullptr;
}

/// For a row-contiguous array (readable_rows copies the others), a row starts
/// on 16 bytes unless the array is a view at an odd offset.
bool rows_aligned(const mx::array& x) {
  const auto address = reinterpret_cast<std::uintptr_t>(mx::gpu_ptr<void>(x));
  return address % kRowAlignment == 0 &&
      (x.shape(-1) * x.itemsize()) % kRowAlignment == 0;
}

/// A fresh copy of the row-contiguous `x` (as [1, 1, rows, D] for the
/// strided copy kernel), kept alive by the encoder until its graph has run.
mx::array aligned_copy(
    const mx::array& x,
    fa::DType dtype,
    cu::CommandEncoder& enc,
    int device,
    int arch) {
  mx::array copy(x.shape(), x.dtype(), nullptr, {});
  cuda::set_device_data(copy, enc);
  const int D = x.shape(-1);
  fa::StridedCopyParams params{};
  params.shape[0] = params.shape[1] = 1;
  params.shape[2] = static_cast<int>(x.size() / D);
  params.shape[3] = D;
  params.strides[2] = D;
  params.strides[3] = 1;
  const int64_t inner = static_cast<int64_t>(x.size());
  const dim3 grid(
      (inner + fa::kStridedCopyThreads - 1) / fa::kStridedCopyThreads, 1, 1);
  enc.set_input_array(x);
  enc.set_output_array(copy);
  enc.add_kernel_node_ex(
      cuda::strided_copy_function(dtype, device, arch),
      grid,
      dim3(fa::kStridedCopyThreads),
      {},
      0,
      mx::gpu_ptr<void>(x),
      mx::gpu_ptr<void>(copy),
      params);
  enc.add_temporary(copy);
  return copy;
}

/// Whether every row of a view with unit head-dim stride starts on 16 bytes
/// when its first row does.
bool row_strides_aligned(const mx::array& x) {
  for (int i = 0; i + 1 < static_cast<int>(x.ndim()); ++i) {
    if (x.shape(i) > 1 && (x.strides()[i] * x.itemsize()) % kRowAlignment) {
      return false;
    }
  }
  return true;
}

/// A row-contiguous copy of `x` in any layout, by MLX's strided copy, into a
/// fresh (so aligned) buffer kept alive by the encoder until its graph has run.
mx::array row_contiguous_copy(
    const mx::array& x,
    cu::CommandEncoder& enc,
    mx::Stream s) {
  mx::array copy(x.shape(), x.dtype(), nullptr, {});
  cuda::set_device_data(copy, enc);
  mx::copy_gpu_inplace(x, copy, mx::CopyType::General, s);
  enc.add_temporary(copy);
  return copy;
}

/// q, k or v as the kernel reads it, with unit head-dim stride and rows on
/// 16 bytes: itself, or a copy (a row-contiguous array at an odd offset
/// needs only the flat aligned_copy).
mx::array readable_rows(
    const mx::array& x,
    fa::DType dtype,
    cu::CommandEncoder& enc,
    mx::Stream s,
    int device,
    int arch) {
  if (x.strides().back() == 1 && rows_aligned(x) && row_strides_aligned(x)) {
    return x;
  }
  return x.flags().row_contiguous ? aligned_copy(x, dtype, enc, device, arch)
                                  : row_contiguous_copy(x, enc, s);
}

void poison(mx::array& out, cu::CommandEncoder& enc, int device, int arch) {
  unsigned long long n = out.nbytes();
  const unsigned long long blocks =
      (n + fa::kPoisonThreads - 1) / fa::kPoisonThreads;
  enc.set_output_array(out);
  enc.add_kernel_node_ex(
      cuda::poison_function(device, arch),
      dim3(static_cast<unsigned>(blocks < 4096 ? blocks : 4096)),
      dim3(fa::kPoisonThreads),
      {},
      0,
      mx::gpu_ptr<void>(out),
      n);
}

CUfunction na_function(const cuda::NaKernelKey& key, int device, int arch) {
  return cuda::kernel_function(
      KernelFamily::Neighborhood,
      cuda::na_kernel_expression(key),
      device,
      arch,
      fa::na_smem_bytes(
          cuda::na_tiles(key), key.head_dim, key.dtype, key.n_axes),
      aot_na_kernel(key));
}

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
  if (d.compute_capability_major() < 8) {
    std::ostringstream msg;
    msg << kOp << "the kernel needs compute capability 8.0 (mma.sync with "
        << "bf16); this GPU has " << d.compute_capability_major() << "."
        << d.compute_capability_minor();
    return Support::no(msg.str());
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
  const int arch =
      d.compute_capability_major() * 10 + d.compute_capability_minor();
  if (Support copy = cuda::copy_kernels_ready(dtype, device, arch); !copy.ok) {
    return {false, kOp + copy.reason};
  }
  const cuda::NaKernelKey key{dtype, D, spec.n_axes};
  const Support ready = cuda::kernel_ready(
      KernelFamily::Neighborhood,
      cuda::na_kernel_expression(key),
      device,
      cuda::na_tiles(key).warps * fa::kSimdWidth,
      [&] { return na_function(key, device, arch); });
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
  const int arch =
      dev.compute_capability_major() * 10 + dev.compute_capability_minor();
  cu::CommandEncoder& enc = cu::get_command_encoder(s);

  mx::array qkv[3] = {inputs[0], inputs[1], inputs[2]};
  for (mx::array& x : qkv) {
    x = readable_rows(x, dtype, enc, s, device, arch);
  }
  cuda::set_device_data(out, enc);
  if (poison_outputs()) {
    poison(out, enc, device, arch);
  }
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
      na_function(key, device, arch),
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
