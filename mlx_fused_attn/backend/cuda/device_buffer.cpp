#include "mlx_fused_attn/backend/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "mlx/backend/cuda/allocator.h"
#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"
#include "mlx/fast.h"
#include "mlx/primitives.h"
#include "mlx_fused_attn/backend/cuda/no_op_kernel_ptx.h"
#include "mlx_fused_attn/backend/cuda/zero_words_kernel_ptx.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/plan/kernel_switches.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

/// MLX's unified buffers of this size or less come from its scalar pool,
/// which gives them back to itself: they stay as they are.
constexpr size_t kScalarPoolBlock = 8;

/// Gives `buf`, just allocated and unwritten, device memory of `enc`'s
/// device where MLX's cache answered with unified memory, so that a kernel
/// writes it without page faults. `zeroed`: the launch that made `buf`
/// zeroed it, so the device memory is zeroed too.
///
/// The host reading an array (array::data(), as np.array does) moves its
/// buffer to unified memory for good (Buffer::raw_ptr), and the cache, which
/// matches sizes only, gives that buffer to the next request of its size, its
/// pages on the host. This is MLX's move_to_unified_memory in reverse, with
/// the calls MLX's allocator makes for each kind of memory, so that MLX later
/// frees the buffer as the device buffer it now is. Nothing is copied: the
/// contents are dead.
void to_device_memory(
    cu::CudaBuffer& buf,
    cu::CommandEncoder& enc,
    bool zeroed) {
  if (buf.device != -1 || buf.size <= kScalarPoolBlock) {
    return;
  }
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, buf.data) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  // Managed memory, or pinned host memory where the GPUs lack concurrent
  // managed access (MLX's unified_malloc).
  if (attr.type != cudaMemoryTypeManaged && attr.type != cudaMemoryTypeHost) {
    return;
  }
  cu::Device& device = enc.device();
  device.make_current();
  void* data = nullptr;
  const cudaError_t made = device.memory_pools()
      ? cudaMallocAsync(&data, buf.size, enc.stream())
      : cudaMalloc(&data, buf.size);
  if (made != cudaSuccess) {
    // No device memory to spare: the unified buffer still holds the output.
    cudaGetLastError();
    return;
  }
  // The zeroing launch wrote the unified buffer. Ordered on the stream as
  // the allocation is, so before the graph whose kernels read the memory.
  if (zeroed && cudaMemsetAsync(data, 0, buf.size, enc.stream()) != cudaSuccess) {
    cudaGetLastError();
    if (device.memory_pools()) {
      cudaFreeAsync(data, enc.stream());
    } else {
      cudaFree(data);
    }
    return;
  }
  // Freed once the command buffer has run, off this thread: freeing unified
  // memory waits for the device, and the launch that made it names it.
  enc.add_completed_handler([unified = buf.data, managed = attr.type ==
                                 cudaMemoryTypeManaged] {
    const cudaError_t freed = managed ? cudaFree(unified) : cudaFreeHost(unified);
    if (freed != cudaSuccess) {
      // Nothing on the completion thread can report it: the memory leaks.
      cudaGetLastError();
    }
  });
  buf.data = data;
  buf.device = device.cuda_device();
}

} // namespace

void set_device_data(mx::array& a, mx::Stream s) {
  set_device_data(std::vector<mx::array*>{&a}, s);
}

void set_device_data(
    const std::vector<mx::array*>& arrays,
    mx::Stream s,
    bool zero_first) {
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  for (const mx::array* a : arrays) {
    shapes.push_back(a->shape());
    dtypes.push_back(a->dtype());
  }
  // CustomKernel takes its outputs from cu::malloc_async and, without an
  // init value, writes nothing before its kernel: the no-op kernel costs one
  // empty launch, where a fill (mx::zeros) would write every byte. It
  // declares one parameter, so the launch reads only the first output's
  // address of those CustomKernel passes, and never through it. Zeroing
  // the first array instead is the same one launch, a thread a word (a
  // multiple of the block's).
  const int words = zero_first ? static_cast<int>(arrays[0]->nbytes() / 4) : 1;
  if (zero_first &&
      (arrays[0]->itemsize() != 4 || words % kZeroWordsThreads != 0)) {
    throw std::logic_error(
        "[set_device_data] internal error: the zeroed array must hold 32-bit "
        "words, a multiple of kZeroWordsThreads");
  }
  const int threads = zero_first ? kZeroWordsThreads : 1;
  std::vector<mx::array> made = mx::fast::precompiled_cuda_kernel(
      /* name = */ zero_first ? kZeroWordsKernelName : kNoOpKernelName,
      /* compiled_source = */ zero_first ? kZeroWordsKernelPtx : kNoOpKernelPtx,
      /* inputs = */ {},
      /* output_shapes = */ shapes,
      /* output_dtypes = */ dtypes,
      /* scalars = */ {},
      /* grid = */ {words, 1, 1},
      /* threadgroup = */ {threads, 1, 1},
      /* shared_memory = */ 0,
      /* init_value = */ std::nullopt,
      /* ensure_row_contiguous = */ false,
      /* s = */ s);
  // Evaluated here, inside this eval_gpu: its node precedes the kernel's.
  made[0].primitive().eval_gpu(made[0].inputs(), made);
  const bool to_device = device_outputs_enabled();
  cu::CommandEncoder& enc = cu::get_command_encoder(s);
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (to_device) {
      // The encoder tracks the buffer by its handle, which stays.
      to_device_memory(
          *static_cast<cu::CudaBuffer*>(made[i].buffer().ptr()),
          enc,
          /* zeroed = */ zero_first && i == 0);
    }
    arrays[i]->copy_shared_buffer(made[i]);
  }
}

} // namespace mlx_fused_attn::cuda

namespace mlx_fused_attn::gpu {

std::string memory_kind(const mlx::core::array& a) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, mlx::core::gpu_ptr<void>(a)) !=
      cudaSuccess) {
    cudaGetLastError();
    return "unregistered";
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      return "device";
    case cudaMemoryTypeManaged:
      return "managed";
    case cudaMemoryTypeHost:
      return "host";
    default:
      return "unregistered";
  }
}

} // namespace mlx_fused_attn::gpu
