#include "mlx_fused_attn/backend/cuda/launch_common.h"

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mlx/backend/cuda/utils.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/backend/cuda/block_sizes.h"
#include "mlx_fused_attn/backend/cuda/device_buffer.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/poison.h"
#include "mlx_fused_attn/kernels/strided_copy_params.h"
#include "mlx_fused_attn/launch_plan.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

/// cp.async copies, ldmatrix and the fragments' paired loads read 16-byte
/// units.
constexpr int kRowAlignment = 16;
/// The grid-stride poison kernel needs no more blocks than fill the GPU.
constexpr unsigned long long kMaxPoisonBlocks = 4096;

/// The copy kernel's view of `x`: axes of extent 1 dropped, each axis merged
/// into the next where the two are contiguous, leading axes padded with 1.
fa::StridedCopyParams copy_params(const mx::array& x) {
  std::vector<int> shape;
  std::vector<int64_t> strides;
  for (int i = 0; i < static_cast<int>(x.ndim()); ++i) {
    if (x.shape(i) == 1) {
      continue;
    }
    if (!shape.empty() && strides.back() == x.strides()[i] * x.shape(i)) {
      shape.back() *= x.shape(i);
      strides.back() = x.strides()[i];
      continue;
    }
    shape.push_back(x.shape(i));
    strides.push_back(x.strides()[i]);
  }
  if (shape.size() > 4) {
    throw std::logic_error(
        "mlx_fused_attn CUDA: internal error: a copy of more than 4 strided "
        "axes");
  }
  fa::StridedCopyParams params{};
  const int pad = 4 - static_cast<int>(shape.size());
  for (int i = 0; i < 4; ++i) {
    params.shape[i] = i < pad ? 1 : shape[i - pad];
    params.strides[i] = i < pad ? 0 : strides[i - pad];
  }
  return params;
}

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
    cu::CommandEncoder& enc,
    int device,
    int arch) {
  mx::array copy(x.shape(), x.dtype(), nullptr, {});
  set_device_data(copy, enc);
  fa::StridedCopyParams params = copy_params(x);
  const int inner = params.shape[2] * params.shape[3];
  const dim3 grid(
      (inner + fa::kStridedCopyThreads - 1) / fa::kStridedCopyThreads,
      params.shape[1],
      params.shape[0]);
  enc.set_input_array(x);
  enc.set_output_array(copy);
  enc.add_kernel_node_ex(
      kernel_function(StridedCopyKernelKey{dtype}, device, arch),
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

mx::array readable_rows(
    const mx::array& x,
    fa::DType dtype,
    cu::CommandEncoder& enc,
    int device,
    int arch) {
  if (rows_readable(x)) {
    return x;
  }
  mx::array copy = contiguous_copy(x, dtype, enc, device, arch);
  if (!rows_readable(copy)) {
    throw std::logic_error(
        "mlx_fused_attn CUDA: internal error: a fresh buffer is not aligned");
  }
  return copy;
}

} // namespace mlx_fused_attn::cuda
