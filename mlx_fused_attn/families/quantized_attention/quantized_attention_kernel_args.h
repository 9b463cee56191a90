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

/// Whether QuantAttnKernelArgs<T> is laid out as the <void> form the host
/// fills: every field at the same offset, the same size and alignment. Pointers
/// are T's only part in it (a field of type T would not compile as <void>), so
/// the host's check of float (quantized_attention_cuda.cpp) holds for every T.
/// Kept from NVRTC's text: NVRTC 13.0 did not parse __builtin_offsetof here
/// (the H100's JIT, 2026-12-06).
#ifndef __CUDACC_RTC__
template <typename T>
constexpr bool kQuantArgsMatchHost =
    sizeof(QuantAttnKernelArgs<T>) == sizeof(QuantAttnKernelArgs<void>) &&
    alignof(QuantAttnKernelArgs<T>) == alignof(QuantAttnKernelArgs<void>) &&
#define FA_QUANT_ARGS_SAME_OFFSET(field)                        \
  __builtin_offsetof(QuantAttnKernelArgs<T>, field) ==          \
      __builtin_offsetof(QuantAttnKernelArgs<void>, field)
    FA_QUANT_ARGS_SAME_OFFSET(q) && FA_QUANT_ARGS_SAME_OFFSET(out) &&
    FA_QUANT_ARGS_SAME_OFFSET(mask) && FA_QUANT_ARGS_SAME_OFFSET(sinks) &&
    FA_QUANT_ARGS_SAME_OFFSET(k_words) && FA_QUANT_ARGS_SAME_OFFSET(k_scales) &&
    FA_QUANT_ARGS_SAME_OFFSET(k_biases) &&
    FA_QUANT_ARGS_SAME_OFFSET(v_words) &&
    FA_QUANT_ARGS_SAME_OFFSET(v_scales) &&
    FA_QUANT_ARGS_SAME_OFFSET(v_biases) &&
    FA_QUANT_ARGS_SAME_OFFSET(o_part) && FA_QUANT_ARGS_SAME_OFFSET(stats) &&
    FA_QUANT_ARGS_SAME_OFFSET(params) && FA_QUANT_ARGS_SAME_OFFSET(qparams) &&
    FA_QUANT_ARGS_SAME_OFFSET(features) &&
    FA_QUANT_ARGS_SAME_OFFSET(n_splits);
#undef FA_QUANT_ARGS_SAME_OFFSET
#endif

} // namespace fa
