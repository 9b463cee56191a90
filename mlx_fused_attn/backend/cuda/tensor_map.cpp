#include "mlx_fused_attn/backend/cuda/tensor_map.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "mlx/backend/cuda/utils.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;

namespace {

static_assert(
    sizeof(fa::TmaMap) == sizeof(CUtensorMap) &&
        alignof(fa::TmaMap) == alignof(CUtensorMap),
    "fa::TmaMap must be the driver's CUtensorMap");

/// The driver's encoder, through the CUDA runtime (this library does not
/// link libcuda).
decltype(&::cuTensorMapEncodeTiled) encoder() {
  static const auto fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion(
            "cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      throw std::runtime_error(
          "[scaled_dot_product_attention] CUDA: the driver lacks "
          "cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<decltype(&::cuTensorMapEncodeTiled)>(p);
  }();
  return fn;
}

} // namespace

bool tensor_map_readable(const mx::array& x) {
  for (int i = 0; i < 3; ++i) {
    if (x.shape(i) > 1 && x.strides()[i] <= 0) {
      return false;
    }
  }
  return true;
}

mx::array tensor_map_rows(
    const mx::array& x,
    fa::DType dtype,
    mx::Stream s,
    int device,
    int arch) {
  mx::array rows = readable_rows(x, dtype, s, device, arch);
  return tensor_map_readable(rows)
      ? rows
      : contiguous_copy(rows, dtype, s, device, arch);
}

fa::TmaMap
panel_tensor_map(const mx::array& x, fa::DType dtype, int rows) {
  const cuuint64_t item = x.itemsize();
  const cuuint64_t dims[4] = {
      cuuint64_t(x.shape(3)), cuuint64_t(x.shape(2)), cuuint64_t(x.shape(1)),
      cuuint64_t(x.shape(0))};
  // An axis of one element has no step of its own: any multiple of 16 bytes
  // does, and the one of a contiguous array is.
  cuuint64_t strides[3];
  cuuint64_t contiguous = dims[0] * item;
  for (int i = 0; i < 3; ++i) {
    const int axis = 2 - i;
    strides[i] = x.shape(axis) > 1 ? cuuint64_t(x.strides()[axis]) * item
                                   : contiguous;
    contiguous *= dims[i + 1];
  }
  const cuuint32_t box[4] = {
      cuuint32_t(128 / item), cuuint32_t(rows), 1, 1};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult r = encoder()(
      &map,
      dtype == fa::DType::BFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                   : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      4,
      const_cast<void*>(mx::gpu_ptr<void>(x)),
      dims,
      strides,
      box,
      unit,
      CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error(
        "[scaled_dot_product_attention] CUDA: cuTensorMapEncodeTiled failed "
        "(error " + std::to_string(int(r)) + ") for an array of shape (" +
        std::to_string(x.shape(0)) + ", " + std::to_string(x.shape(1)) + ", " +
        std::to_string(x.shape(2)) + ", " + std::to_string(x.shape(3)) + ")");
  }
  fa::TmaMap out;
  std::memcpy(&out, &map, sizeof(out));
  return out;
}

} // namespace mlx_fused_attn::cuda
