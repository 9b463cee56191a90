// A CUDA kernel's tiles as one template argument: a type whose `value` is
// the family's tiles struct. The kernels read only `Tiles::value`, so a new
// tile field changes no kernel signature, and a benchmark may pass any type
// with such a member. The library names its instances by the types below
// (the families' *_kernel_key.h spell them in the NVRTC expressions). The
// general kernel's tiles, which the backward's kernels take too; the other
// families keep theirs in their folders (short_attention_tiles_of.h,
// na_tiles_of.h).
#pragma once

#include "mlx_fused_attn/kernels/attention_config.h"

namespace fa {

template <
    int BQ,
    int BK,
    int WM,
    int ST = 1,
    int MB = 1,
    bool WG = false,
    bool QS = false,
    bool PR = false,
    bool PE = false,
    bool SM = false,
    bool KS = false>
struct AttnTilesOf {
  static constexpr AttnTiles value = {
      BQ, BK, WM, ST, MB, WG, QS, PR, PE, SM, KS};
};

} // namespace fa
