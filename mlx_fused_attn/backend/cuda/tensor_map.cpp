#include "mlx_fused_attn/backend/cuda/tensor_map.h"

#include <stdexcept>
#include <string>

#include "mlx/backend/cuda/utils.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/backend/cuda/panel_tensor_map.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;

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
  if (fa::tensor_map_encoder() == nullptr) {
    throw std::runtime_error(
        "[scaled_dot_product_attention] CUDA: the driver lacks "
        "cuTensorMapEncodeTiled");
  }
  fa::TmaMap out;
  const CUresult r = fa::encode_panel_tensor_map(
      &out, dtype, mx::gpu_ptr<void>(x), dims, strides, rows);
  if (r != CUDA_SUCCESS) {
    throw std::runtime_error(
        "[scaled_dot_product_attention] CUDA: cuTensorMapEncodeTiled failed "
        "(error " + std::to_string(int(r)) + ") for an array of shape (" +
        std::to_string(x.shape(0)) + ", " + std::to_string(x.shape(1)) + ", " +
        std::to_string(x.shape(2)) + ", " + std::to_string(x.shape(3)) + ")");
  }
  return out;
}

} // namespace mlx_fused_attn::cuda
