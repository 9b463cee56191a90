// A CUDA kernel's tiles as one template argument: a type whose `value` is
// the family's tiles struct. The kernels read only `Tiles::value`, so a new
// tile field changes no kernel signature, and a benchmark may pass any type
// with such a member. The library names its instances by the types below
// (kernel_families.h spells them in the NVRTC expressions).
#pragma once

#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/families/short_attention/short_attention_config.h"

namespace fa {

template <
    int BQ,
    int BK,
    int WM,
    int ST = 1,
    int MB = 1,
    bool WG = false,
    bool QS = false,
    bool PR = false>
struct AttnTilesOf {
  static constexpr AttnTiles value = {BQ, BK, WM, ST, MB, WG, QS, PR};
};

template <int SEQ, int WR, int WM, int NP>
struct ShortTilesOf {
  static constexpr ShortAttnTiles value = {SEQ, WR, WM, NP};
};

template <int WR, int KB, int WM, int ST, int MB>
struct NaTilesOf {
  static constexpr NaTiles value = {WR, KB, WM, ST, MB};
};

} // namespace fa
