// The short-sequence kernel's tiles as one CUDA template argument, as
// kernels/cuda/kernel_tiles.h does for the general kernel's: a type whose
// `value` is a ShortAttnTiles (short_attention_kernel_key.h spells it in
// the NVRTC expressions).
#pragma once

#include "mlx_fused_attn/families/short_attention/short_attention_config.h"

namespace fa {

template <int SEQ, int WR, int WM, int NP>
struct ShortTilesOf {
  static constexpr ShortAttnTiles value = {SEQ, WR, WM, NP};
};

} // namespace fa
