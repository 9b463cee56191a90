// The one argument of a CUDA launch of the quantized-KV family
// (quantized_attention_kernel.cuh), passed by value: what Metal binds as
// buffers one by one. Host and device C++ alike (no address spaces: CUDA
// has none), so that the host fills the struct the kernel reads.
#pragma once

#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/quantized_kv_params.h"

namespace fa {

/// Every pointer's type follows T, none its layout: the host fills a
/// QuantAttnKernelArgs<void>, which an instance reads as its own T's.
template <typename T>
struct QuantAttnKernelArgs {
  const T* q;
  T* out;
  const unsigned char* mask; ///< bool, or T, as features.bool_mask says
  const T* sinks; ///< [H_q]
  const unsigned int* k_words; ///< QuantKVArrays (quantized_attention_args.h)
  const T* k_scales;
  const T* k_biases;
  const unsigned int* v_words;
  const T* v_scales;
  const T* v_biases;
  float* o_part; ///< split partial outputs (split_keys.h; n_splits > 1)
  float* stats; ///< their row maxima, then row sums
  /// Zeroed, one a query block, head and batch: the last split of each
  /// merges (kernels/cuda/split_merge.cuh); null: the combine kernel does.
  unsigned int* split_counters;
  AttnParams params;
  QuantKvParams qparams;
  AttnFeatures features; ///< causal and has_mask: the instance's own
  int n_splits; ///< 1: no split
};

} // namespace fa
