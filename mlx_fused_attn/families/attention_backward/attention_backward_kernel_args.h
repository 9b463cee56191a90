// The one argument struct of the backward's two tiled CUDA entry points
// (attention_backward_kernel.cuh: attention_bwd_dkdv_kernel,
// attention_bwd_dq_kernel), passed by value. Host and device C++ alike (no
// address spaces: CUDA has none), so that the host fills the struct the
// kernel reads.
#pragma once

#include "mlx_fused_attn/families/attention_backward/backward_params.h"
#include "mlx_fused_attn/kernels/attention_features.h"

namespace fa {

/// Every pointer's type follows T, none its layout: the host fills an
/// AttnBwdKernelArgs<void>, which an instance reads as its own T's. Each
/// kernel reads its own gradients (dK, dV and the one-kernel form's dQ
/// accumulator, or dQ) and leaves the others null.
template <typename T>
struct AttnBwdKernelArgs {
  const T* q;
  const T* k;
  const T* v;
  const T* dout;
  const float* lse; ///< the forward's, fp32 [B, H_q, L_q]
  const float* d; ///< rowsum(dO * O), as the LSE
  T* dq;
  T* dk;
  T* dv;
  float* dq_acc; ///< attention_backward_dq_atomics.h; null: two kernels
  AttnBwdParams params;
  const unsigned char* mask; ///< bool, or T, as features.bool_mask says
  const unsigned int* lists; ///< kernels/mask_visits.h
  AttnFeatures features; ///< causal and has_mask: the instance's own
};

/// Whether AttnBwdKernelArgs<T> is laid out as the <void> form the host fills:
/// every field at the same offset, the same size and alignment. Pointers are
/// T's only part in it (a field of type T would not compile as <void>), so the
/// host's check of float (attention_backward_cuda.cpp) holds for every T. Kept
/// from NVRTC's text: NVRTC 13.0 did not parse __builtin_offsetof here (the
/// H100's JIT, 2026-12-06).
#ifndef __CUDACC_RTC__
template <typename T>
constexpr bool kAttnBwdArgsMatchHost =
    sizeof(AttnBwdKernelArgs<T>) == sizeof(AttnBwdKernelArgs<void>) &&
    alignof(AttnBwdKernelArgs<T>) == alignof(AttnBwdKernelArgs<void>) &&
#define FA_BWD_ARGS_SAME_OFFSET(field)                  \
  __builtin_offsetof(AttnBwdKernelArgs<T>, field) ==    \
      __builtin_offsetof(AttnBwdKernelArgs<void>, field)
    FA_BWD_ARGS_SAME_OFFSET(q) && FA_BWD_ARGS_SAME_OFFSET(k) &&
    FA_BWD_ARGS_SAME_OFFSET(v) && FA_BWD_ARGS_SAME_OFFSET(dout) &&
    FA_BWD_ARGS_SAME_OFFSET(lse) && FA_BWD_ARGS_SAME_OFFSET(d) &&
    FA_BWD_ARGS_SAME_OFFSET(dq) && FA_BWD_ARGS_SAME_OFFSET(dk) &&
    FA_BWD_ARGS_SAME_OFFSET(dv) && FA_BWD_ARGS_SAME_OFFSET(dq_acc) &&
    FA_BWD_ARGS_SAME_OFFSET(params) && FA_BWD_ARGS_SAME_OFFSET(mask) &&
    FA_BWD_ARGS_SAME_OFFSET(lists) && FA_BWD_ARGS_SAME_OFFSET(features);
#undef FA_BWD_ARGS_SAME_OFFSET
#endif

} // namespace fa
