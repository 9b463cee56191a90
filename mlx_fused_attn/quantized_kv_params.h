// Kernel parameters of the quantized-KV attention family beside AttnParams
// (params.h): where the quantized K and V are (MLX's affine layout,
// tile/quantized_block_loader.h) and how they are quantized. Plain old
// data, shared by the host, Metal, CUDA and the Metal emulator, as
// params.h is; AttnParams' k_strides and v_strides are not read by this
// family.
#pragma once

#include "mlx_fused_attn/params.h"

namespace fa {

struct QuantKVParams {
  /// Strides, in elements (uint32 words, or T), for the batch, head and
  /// key axes of K's words, scales and biases; the last axis is contiguous.
  stride_t k_word_strides[3];
  stride_t k_scale_strides[3];
  stride_t k_bias_strides[3];
  /// The same for V.
  stride_t v_word_strides[3];
  stride_t v_scale_strides[3];
  stride_t v_bias_strides[3];
  int group_size; ///< values a scale and a bias cover: 32, 64 or 128
  int bits; ///< bits a value: the kernel instance's (checked by the host)
};

} // namespace fa
