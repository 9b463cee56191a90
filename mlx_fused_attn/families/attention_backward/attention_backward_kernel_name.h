// Host-side names of the backward kernels: the one place they are built.
// The Metal instantiation lists (mlx_fused_attn/families/attention_backward/attention_backward.metal and
// attention_backward_row_dot.metal, written by tools/gen_instances.py)
// spell the same names from the same tiles.
#pragma once

#include <string>

#include "mlx_fused_attn/families/attention_backward/attention_backward_config.h"
#include "mlx_fused_attn/kernels/attention_kernel_name.h"

namespace fa {

inline std::string attention_backward_row_dot_name(DType dtype) {
  return std::string("fa_attention_bwd_row_dot_") + dtype_name(dtype);
}

/// The kernel for (dtype, head dim) with the tiles
/// choose_attention_backward_tiles gave it.
inline std::string attention_backward_kernel_name(
    BwdKernel kernel,
    DType dtype,
    int head_dim,
    AttnTiles tiles) {
  return std::string("fa_attention_bwd_") +
      (kernel == BwdKernel::DkDv ? "dkdv_" : "dq_") + dtype_name(dtype) +
      "_d" + std::to_string(head_dim) + "_bq" + std::to_string(tiles.bq) +
      "_bk" + std::to_string(tiles.bk) + "_wm" + std::to_string(tiles.warps);
}

} // namespace fa
