// Host-side names of the Metal neighborhood-attention kernels: the one
// place they are built. mlx_fused_attn/families/neighborhood/neighborhood.metal spells the same names in
// its instantiation list (written by tools/gen_instances.py), and
// tests/metal_emu/test_na_kernel.py checks that they agree.
#pragma once

#include <string>

#include "mlx_fused_attn/kernels/attention_kernel_name.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"

namespace fa {

/// The kernel for (spatial axes, dtype, head dim) with the tiles
/// choose_na_tiles gave for it.
inline std::string
na_kernel_name(int n_axes, DType dtype, int head_dim, NaTiles tiles) {
  return std::string("fa_na") + std::to_string(n_axes) + "d_" +
      dtype_name(dtype) + "_d" + std::to_string(head_dim) + "_bq" +
      std::to_string(na_tile_queries(tiles)) + "_bk" +
      std::to_string(tiles.key_block) + "_wm" +
      std::to_string(tiles.warps);
}

} // namespace fa
