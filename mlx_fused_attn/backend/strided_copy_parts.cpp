#include "mlx_fused_attn/backend/strided_copy_parts.h"

namespace mlx_fused_attn {

std::vector<StridedCopyPart> strided_copy_parts(const mlx::core::array& x) {
  std::vector<int64_t> shape;
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
  while (shape.size() < 4) {
    shape.insert(shape.begin(), 1);
    strides.insert(strides.begin(), 0);
  }
  const size_t outer = shape.size() - 4;
  int64_t part_elems = 1;
  for (size_t i = outer; i < shape.size(); ++i) {
    part_elems *= shape[i];
  }
  int64_t parts = 1;
  for (size_t i = 0; i < outer; ++i) {
    parts *= shape[i];
  }

  std::vector<StridedCopyPart> out;
  for (int64_t n = 0; n < parts; ++n) {
    StridedCopyPart part{};
    int64_t rest = n;
    for (size_t i = outer; i-- > 0;) {
      part.src_offset += (rest % shape[i]) * strides[i];
      rest /= shape[i];
    }
    part.dst_offset = n * part_elems;
    for (int i = 0; i < 4; ++i) {
      part.params.shape[i] = static_cast<int>(shape[outer + i]);
      part.params.strides[i] = strides[outer + i];
    }
    out.push_back(part);
  }
  return out;
}

} // namespace mlx_fused_attn
