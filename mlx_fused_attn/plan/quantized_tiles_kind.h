// Which of the quantized family's tiles a plan runs: the choice that
// quantized_kernel_choice.h makes and MLX_FUSED_ATTN_QUANT_DECODE_TILES
// (kernel_switches.h) forces.
#pragma once

namespace mlx_fused_attn {

enum class QuantizedTilesKind {
  /// choose_quantized_attention_tiles
  Default,
  /// choose_quantized_decode_tiles: one warp a threadgroup
  Decode,
  /// choose_quantized_sliced_tiles: four warps split each block's keys
  KeySlices,
};

} // namespace mlx_fused_attn
