// Parameters of the strided copy kernel (strided_copy.h), shared by the host
// that fills them and the kernel that reads them.
#pragma once

#include "mlx_fused_attn/params.h"

namespace fa {

struct StridedCopyParams {
  int shape[4]; ///< source (and destination) shape, leading axes padded with 1
  stride_t strides[4]; ///< source strides in elements
};

} // namespace fa
