// A strided 4-D array copied into a row-contiguous one, one element per
// thread. The attention kernels need a unit stride along the head dim; the
// host runs this first on an input that lacks it (MLX's own copy kernels are
// not exported to extensions).
#pragma once

#include "mlx_fused_attn/families/strided_copy/strided_copy_params.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// Copies element (i0, i1, i2, i3) of the source, where i3 and i2 come from
/// `inner` (an index into the last two axes) and i1, i0 from the grid.
template <typename T>
FA_FUNC void strided_copy_element(
    const FA_DEVICE T* src,
    FA_DEVICE T* dst,
    const FA_CONSTANT StridedCopyParams& p,
    int inner,
    int i1,
    int i0) {
  const int i3 = inner % p.shape[3];
  const int i2 = inner / p.shape[3];
  const stride_t s = i0 * p.strides[0] + i1 * p.strides[1] + i2 * p.strides[2] +
      i3 * p.strides[3];
  const stride_t d =
      ((stride_t(i0) * p.shape[1] + i1) * p.shape[2] + i2) * p.shape[3] + i3;
  dst[d] = src[s];
}

} // namespace fa
