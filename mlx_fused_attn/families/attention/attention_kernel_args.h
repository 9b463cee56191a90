// The one argument struct of the general kernel's two CUDA entry points
// (attention_kernel.cuh: attention_kernel, attention_producer_kernel),
// passed by value. Host and device C++ alike (no address spaces: CUDA has
// none), so that the host fills the struct the kernel reads.
#pragma once

#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/params.h"

namespace fa {

/// Every pointer's type follows T, none its layout: the host fills an
/// AttnKernelArgs<void>, which an instance reads as its own T's. The
/// fields keep the order the kernels' positional parameters had, so that
/// each sits at its old parameter's offset.
template <typename T>
struct AttnKernelArgs {
  const T* q;
  const T* k;
  const T* v;
  T* out;
  AttnParams params;
  const unsigned char* mask; ///< bool, or T, as features.bool_mask says
  const T* sinks; ///< [H_q]
  AttnFeatures features; ///< causal and has_mask: the instance's own
  float* o_part; ///< split partial outputs (split_keys.h; n_splits > 1)
  float* stats; ///< their row maxima, then row sums
  /// Zeroed, one a query block, head and batch: the last split of each
  /// merges (kernels/cuda/split_merge.cuh); null: split_combine_kernel does.
  unsigned int* split_counters;
  int n_splits; ///< 1: no split
  float* lse; ///< fp32 [B, H_q, L_q] where features.has_lse
  const unsigned int* mask_blocks; ///< kernels/mask_visits.h
};

/// Whether AttnKernelArgs<T> is laid out as the <void> form the host fills:
/// every field at the same offset, the same size and alignment. Pointers are
/// T's only part in it (a field of type T would not compile as <void>), so the
/// host's check of float (attention_cuda.cpp) holds for every T. Kept from
/// NVRTC's text: NVRTC 13.0 did not parse __builtin_offsetof here (the H100's
/// JIT, 2026-12-06).
#ifndef __CUDACC_RTC__
template <typename T>
constexpr bool kAttnArgsMatchHost =
    sizeof(AttnKernelArgs<T>) == sizeof(AttnKernelArgs<void>) &&
    alignof(AttnKernelArgs<T>) == alignof(AttnKernelArgs<void>) &&
#define FA_ATTN_ARGS_SAME_OFFSET(field)                 \
  __builtin_offsetof(AttnKernelArgs<T>, field) ==       \
      __builtin_offsetof(AttnKernelArgs<void>, field)
    FA_ATTN_ARGS_SAME_OFFSET(q) && FA_ATTN_ARGS_SAME_OFFSET(k) &&
    FA_ATTN_ARGS_SAME_OFFSET(v) && FA_ATTN_ARGS_SAME_OFFSET(out) &&
    FA_ATTN_ARGS_SAME_OFFSET(params) && FA_ATTN_ARGS_SAME_OFFSET(mask) &&
    FA_ATTN_ARGS_SAME_OFFSET(sinks) && FA_ATTN_ARGS_SAME_OFFSET(features) &&
    FA_ATTN_ARGS_SAME_OFFSET(o_part) && FA_ATTN_ARGS_SAME_OFFSET(stats) &&
    FA_ATTN_ARGS_SAME_OFFSET(split_counters) &&
    FA_ATTN_ARGS_SAME_OFFSET(n_splits) && FA_ATTN_ARGS_SAME_OFFSET(lse) &&
    FA_ATTN_ARGS_SAME_OFFSET(mask_blocks);
#undef FA_ATTN_ARGS_SAME_OFFSET
#endif

} // namespace fa
