// An array of any rank as 4-D strided copies (families/strided_copy/strided_copy.h), for
// the row-contiguous copies the GPU hosts make of inputs a kernel cannot
// read in place. MLX's own copy kernels are not exported to extensions.
#pragma once

#include <cstdint>
#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/families/strided_copy/strided_copy_params.h"

namespace mlx_fused_attn {

/// One 4-D copy: its shape and source strides, and where its elements start
/// in the source and in the row-contiguous destination, in elements.
struct StridedCopyPart {
  fa::StridedCopyParams params;
  int64_t src_offset;
  int64_t dst_offset;
};

/// The copies that together write `x` row-contiguously: its axes of extent
/// 1 dropped and each axis merged into the next where the two are
/// contiguous; axes that remain before the last four become one copy per
/// index (rare: views such as a 6-D neighborhood input with every axis
/// permuted).
std::vector<StridedCopyPart> strided_copy_parts(const mlx::core::array& x);

} // namespace mlx_fused_attn
