#include "mlx_fused_attn/backend/cuda/launch_common.h"

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mlx/backend/cuda/utils.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/kernels/cuda/block_sizes.h"
#include "mlx_fused_attn/backend/cuda/device_buffer.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/families/strided_copy/cuda/strided_copy_kernel_key.h"
#include "mlx_fused_attn/families/strided_copy/strided_copy_kernel_args.h"
#include "mlx_fused_attn/backend/poison.h"
#include "mlx_fused_attn/backend/strided_copy_parts.h"
#include "mlx_fused_attn/families/strided_copy/strided_copy_params.h"
#include "mlx_fused_attn/plan/launch_plan.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

/// cp.async copies, ldmatrix and the fragments' paired loads read 16-byte
/// units.
constexpr int kRowAlignment = 16;
/// The grid-stride poison kernel needs no more blocks than fill the GPU.
constexpr unsigned long long kMaxPoisonBlocks = 4096;

} // namespace

bool rows_readable(const mx::array& x) {
  return !needs_row_copy(
      x, reinterpret_cast<std::uintptr_t>(mx::gpu_ptr<void>(x)), kRowAlignment);
}

int arch_of(cu::Device& device) {
  return device.compute_capability_major() * 10 +
      device.compute_capability_minor();
}

Support device_supported(const char* op, cu::Device& device) {
  if (device.compute_capability_major() >= 8) {
    return {true, ""};
  }
  std::ostringstream msg;
  msg << op << "the kernel needs compute capability 8.0 (mma.sync with "
      << "bf16); this GPU has " << device.compute_capability_major() << "."
      << device.compute_capability_minor();
  return Support::no(msg.str());
}

void poison(mx::array& out, cu::CommandEncoder& enc, int device, int arch) {
  if (!poison_outputs()) {
    return;
  }
  unsigned long long n = out.nbytes();
  const unsigned long long blocks =
      (n + fa::kPoisonThreads - 1) / fa::kPoisonThreads;
  enc.set_output_array(out);
  enc.add_kernel_node_ex(
      kernel_function(PoisonKernelKey{}, device, arch),
      dim3(static_cast<unsigned>(
          blocks < kMaxPoisonBlocks ? blocks : kMaxPoisonBlocks)),
      dim3(fa::kPoisonThreads),
      {},
      0,
      mx::gpu_ptr<void>(out),
      n);
}

mx::array contiguous_copy(
    const mx::array& x,
    fa::DType dtype,
    mx::Stream s,
    int device,
    int arch) {
  mx::array copy(x.shape(), x.dtype(), nullptr, {});
  set_device_data(copy, s);
  cu::CommandEncoder& enc = cu::get_command_encoder(s);
  const CUfunction kernel =
      kernel_function(StridedCopyKernelKey{dtype}, device, arch);
  const auto* src = static_cast<const char*>(mx::gpu_ptr<void>(x));
  auto* dst = static_cast<char*>(mx::gpu_ptr<void>(copy));
  for (const StridedCopyPart& part : strided_copy_parts(x)) {
    // Not const: the encoder takes its kernel arguments by non-const address.
    fa::StridedCopyKernelArgs args{};
    args.src = src + part.src_offset * x.itemsize();
    args.dst = dst + part.dst_offset * x.itemsize();
    args.params = part.params;
    const fa::StridedCopyParams& p = args.params;
    const int inner = p.shape[2] * p.shape[3];
    // Each node takes the dependencies registered before it.
    enc.set_input_array(x);
    enc.set_output_array(copy);
    enc.add_kernel_node_ex(
        kernel,
        dim3(
            (inner + fa::kStridedCopyThreads - 1) / fa::kStridedCopyThreads,
            p.shape[1],
            p.shape[0]),
        dim3(fa::kStridedCopyThreads),
        {},
        0,
        args);
  }
  enc.add_temporary(copy);
  return copy;
}

mx::array readable_rows(
    const mx::array& x,
    fa::DType dtype,
    mx::Stream s,
    int device,
    int arch) {
  if (rows_readable(x)) {
    return x;
  }
  mx::array copy = contiguous_copy(x, dtype, s, device, arch);
  if (!rows_readable(copy)) {
    throw std::logic_error(
        "mlx_fused_attn CUDA: internal error: a fresh buffer is not aligned");
  }
  return copy;
}

} // namespace mlx_fused_attn::cuda
