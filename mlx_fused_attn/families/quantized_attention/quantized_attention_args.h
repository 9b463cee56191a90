// The arguments of the quantized-KV attention body (quantized_attention.h)
// beside the float body's (attention_args.h), gathered once in each entry
// point (quantized_attention.metal, quantized_attention_kernel.cuh): K and
// V as MLX's affine quantization stores them, and on CUDA the kernel's one
// argument. Every pointer names its address space.
#pragma once

#include "mlx_fused_attn/kernels/attention_args.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/quantized_kv_params.h"
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

/// Everything one CUDA launch of the family reads, passed by value as the
/// kernel's one argument (Metal binds the same pieces as buffers): the
/// float body's arrays (k, v and lse unset: K and V are `kv`, and there is
/// no backward), the quantized K and V, the shapes and strides, the
/// quantization, the run-time features and the split count (1: no split;
/// the partials are arrays' split fields, set by the kernel from it).
template <typename T>
struct QuantAttnKernelArgs {
  AttnArrays<T> arrays;
  QuantKVArrays<T> kv;
  AttnParams params;
  QuantKvParams qparams;
  AttnFeatures features;
  FA_DEVICE float* o_part; ///< split partial outputs (split_keys.h)
  FA_DEVICE float* stats; ///< their row maxima, then row sums
  int n_splits;
};

} // namespace fa
