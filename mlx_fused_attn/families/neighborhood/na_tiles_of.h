// The neighborhood kernel's tiles as one CUDA template argument, as
// kernels/cuda/kernel_tiles.h does for the general kernel's: a type whose
// `value` is a NaTiles (na_kernel_key.h spells it in the NVRTC expressions).
#pragma once

#include "mlx_fused_attn/families/neighborhood/na_config.h"

namespace fa {

template <int WR, int KB, int WM, int ST, int MB>
struct NaTilesOf {
  static constexpr NaTiles value = {WR, KB, WM, ST, MB};
};

} // namespace fa
