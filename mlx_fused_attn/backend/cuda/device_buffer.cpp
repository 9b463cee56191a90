#include "mlx_fused_attn/backend/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/cuda/allocator.h"

namespace mlx_fused_attn::cuda {

namespace {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

constexpr const char* kOp = "[scaled_dot_product_attention] CUDA: ";

/// A device's pool, and the stream that frees into it. Freed memory stays
/// reserved up to the release threshold, so a call of the same size as an
/// earlier one reuses its memory without mapping new pages (a pool trimmed
/// at every synchronisation, as the default one is, would not).
struct DevicePool {
  cudaMemPool_t pool = nullptr; ///< null: the device has no memory pools
  cudaStream_t free_stream = nullptr;
};

void check(cudaError_t r, const char* what) {
  if (r != cudaSuccess) {
    throw std::runtime_error(
        std::string(kOp) + what + ": " + cudaGetErrorString(r));
  }
}

DevicePool make_pool(int device) {
  DevicePool p;
  int supported = 0;
  check(
      cudaDeviceGetAttribute(
          &supported, cudaDevAttrMemoryPoolsSupported, device),
      "querying memory pool support");
  if (!supported) {
    return p;
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  check(cudaMemPoolCreate(&p.pool, &props), "creating a memory pool");
  // Up to 1/16 of the device stays reserved between synchronisations:
  // room for many calls' outputs (B=4 H=32 L=8192 D=128 bf16 writes 268
  // MB), little next to what MLX's own buffer cache may keep (95%).
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  std::uint64_t threshold = total_bytes / 16;
  check(
      cudaMemPoolSetAttribute(
          p.pool, cudaMemPoolAttrReleaseThreshold, &threshold),
      "setting the pool's release threshold");
  check(
      cudaStreamCreateWithFlags(&p.free_stream, cudaStreamNonBlocking),
      "creating the free stream");
  return p;
}

/// Pools live for the process: buffers may be freed during its exit.
const DevicePool& pool_of(int device) {
  static std::mutex mutex;
  static auto* pools = new std::map<int, DevicePool>;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = pools->find(device);
  if (it == pools->end()) {
    it = pools->emplace(device, make_pool(device)).first;
  }
  return it->second;
}

/// The deleter. Errors are ignored: it runs in destructors, possibly while
/// the CUDA runtime shuts down.
///
/// A dropped output may still be being written when it is freed, as MLX's
/// own buffers may when they return to its cache: reuse by a later call on
/// the same stream is ordered after that write; MLX orders work across
/// streams with events.
void release(mx::allocator::Buffer buffer) {
  auto* buf = static_cast<cu::CudaBuffer*>(buffer.ptr());
  if (buf->device >= 0) {
    (void)cudaFreeAsync(buf->data, pool_of(buf->device).free_stream);
  } else {
    // A host read made MLX move the data to unified memory (Buffer::raw_ptr)
    // and free ours: managed memory, or pinned host memory on devices
    // without it.
    cudaPointerAttributes attributes = {};
    if (cudaPointerGetAttributes(&attributes, buf->data) == cudaSuccess &&
        attributes.type == cudaMemoryTypeHost) {
      (void)cudaFreeHost(buf->data);
    } else {
      (void)cudaFree(buf->data);
    }
  }
  delete buf;
}

} // namespace

void set_device_data(mx::array& a, cu::CommandEncoder& enc) {
  const int device = enc.device().cuda_device();
  const DevicePool& p = pool_of(device);
  if (p.pool == nullptr) {
    a.set_data(mx::allocator::malloc(a.nbytes()));
    return;
  }
  void* data = nullptr;
  cudaError_t r =
      cudaMallocFromPoolAsync(&data, a.nbytes(), p.pool, enc.stream());
  if (r == cudaErrorMemoryAllocation) {
    // Memory this pool keeps reserved may be what is missing.
    (void)cudaGetLastError();
    (void)cudaMemPoolTrimTo(p.pool, 0);
    r = cudaMallocFromPoolAsync(&data, a.nbytes(), p.pool, enc.stream());
  }
  check(r, ("allocating " + std::to_string(a.nbytes()) + " bytes").c_str());
  a.set_data(mx::allocator::Data(
      mx::allocator::Buffer(new cu::CudaBuffer{data, a.nbytes(), device}),
      release));
}

} // namespace mlx_fused_attn::cuda
