// The arguments of the quantized-KV attention body (quantized_attention.h)
// beside the float body's (attention_args.h), gathered once in each entry
// point (quantized_attention.metal, quantized_attention_kernel.cuh): K and
// V as MLX's affine quantization stores them. Every pointer names its
// address space.
#pragma once

#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// Quantized K and V ([B, H_kv, L_k, D * bits / 32] words; [B, H_kv, L_k,
/// D / group_size] scales and biases in T).
template <typename T>
struct QuantKVArrays {
  const FA_DEVICE unsigned int* k_words;
  const FA_DEVICE T* k_scales;
  const FA_DEVICE T* k_biases;
  const FA_DEVICE unsigned int* v_words;
  const FA_DEVICE T* v_scales;
  const FA_DEVICE T* v_biases;
};

} // namespace fa
