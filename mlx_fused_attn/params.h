// Kernel parameters shared by the host code and every kernel (CPU, Metal,
// CUDA and the Metal emulator). Plain old data only: the struct is copied
// byte for byte into a Metal constant buffer or a CUDA kernel argument, so
// every field has a fixed size and the layout must not depend on the target.
#pragma once

#if defined(__METAL_VERSION__)
#include <metal_stdlib>
#define FA_PARAMS_INT64 long
#elif defined(__CUDACC_RTC__)
// NVRTC has no C library headers; long long is 64 bits on every CUDA
// target, the size and alignment of the host's int64_t.
#define FA_PARAMS_INT64 long long
#else
#include <stdint.h>
#define FA_PARAMS_INT64 int64_t
#endif

namespace fa {

typedef FA_PARAMS_INT64 stride_t;

struct AttnParams {
  int B; ///< batch size
  int H_q; ///< number of query heads
  int H_kv; ///< number of key/value heads (H_q % H_kv == 0)
  int gqa_factor; ///< H_q / H_kv: query heads sharing one key/value head
  int L_q; ///< query sequence length
  int L_k; ///< key/value sequence length
  int D; ///< head dimension of q and k
  int D_v; ///< head dimension of v and of the output

  int causal_offset; ///< L_k - L_q: query i sees keys j <= i + causal_offset
  float scale_log2; ///< softmax scale times log2(e): scores live in exp2 domain

  /// Strides, in elements, for the batch, head and sequence axes; the head
  /// dimension is contiguous (stride 1) for q, k, v and the output.
  stride_t q_strides[3];
  stride_t k_strides[3];
  stride_t v_strides[3];
  stride_t o_strides[3];
  /// Mask strides for [B, H_q, L_q, L_k]; 0 on broadcast axes.
  stride_t mask_strides[4];
  /// Strides of the mask's classes by block (kernels/mask_visits.h): its
  /// batch and head slices (0 on broadcast axes), a visit row (one query
  /// block's) and a row of shown bits (one query's).
  stride_t mask_block_strides[4];
  /// 1: the additive mask may be read two columns at a time (CUDA loads a
  /// pair as one): unit column stride, even L_k, and even strides and
  /// offset, so that a pair at an even column c < L_k is aligned and in
  /// bounds.
  int mask_pairs;
};

} // namespace fa

#undef FA_PARAMS_INT64
