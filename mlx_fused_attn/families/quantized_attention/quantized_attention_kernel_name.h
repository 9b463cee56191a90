// Host-side names of the quantized-KV attention kernels: the one place
// they are built. quantized_attention.metal spells the same names
// from the same tiles (written by tools/gen_instances.py), and
// tests/metal_emu checks that they agree.
#pragma once

#include <string>

#include "mlx_fused_attn/kernels/attention_kernel_name.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_config.h"

namespace fa {

/// The kernel for (dtype, head dim, bits) with its tiles.
inline std::string quantized_attention_kernel_name(
    DType dtype,
    int head_dim,
    int bits,
    AttnTiles tiles) {
  return std::string("fa_quantized_attention_") + dtype_name(dtype) + "_d" +
      std::to_string(head_dim) + "_b" + std::to_string(bits) + "_bq" +
      std::to_string(tiles.bq) + "_bk" + std::to_string(tiles.bk) + "_wm" +
      std::to_string(tiles.warps);
}

/// The combine of split keys in this family's library, writing `dtype`.
inline std::string quantized_split_combine_kernel_name(DType dtype) {
  return std::string("fa_quantized_split_combine_") + dtype_name(dtype);
}

} // namespace fa
