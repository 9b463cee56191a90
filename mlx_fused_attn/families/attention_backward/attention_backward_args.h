// The arguments of the backward's two bodies (attention_backward.h),
// gathered once in each entry point (mlx_fused_attn/families/attention_backward/attention_backward.metal,
// backend/cuda/attention_backward_kernel.cuh) and read by name: the arrays
// they read and write, their threadgroup memory, and where in the grid a
// threadgroup works. Every pointer names its address space, as Metal
// requires of a pointer in a struct (attention_args.h).
#pragma once

#include "mlx_fused_attn/families/attention_backward/backward_params.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// The arrays of one backward call: the forward's inputs, dO, the
/// forward's row LSE and D = rowsum(dO * O) (fp32 [B, H_q, L_q]), the
/// gradients (each kernel writes its own: dK and dV, or dQ), the mask
/// and its block lists where the features say (has_mask, mask_blocks), and
/// the fp32 dQ accumulator of the one-kernel form
/// (attention_backward_dq_atomics.h; CUDA only).
template <typename T>
struct AttnBwdArrays {
  const FA_DEVICE T* q;
  const FA_DEVICE T* k;
  const FA_DEVICE T* v;
  const FA_DEVICE T* dout;
  const FA_DEVICE float* lse;
  const FA_DEVICE float* d;
  FA_DEVICE T* dq;
  FA_DEVICE T* dk;
  FA_DEVICE T* dv;
  const FA_DEVICE unsigned char* mask;
  const FA_DEVICE unsigned int* lists; ///< kernels/mask_visits.h
  FA_DEVICE float* dq_acc;
};

/// A backward kernel's threadgroup memory: the two blocks it streams (Q's
/// and dO's for dK/dV, K's and V's for dQ), the owned rows' operands
/// where the target keeps them there, and the one-kernel form's dS and K
/// (attention_backward_dq_atomics.h).
template <typename T>
struct AttnBwdSmem {
  FA_THREADGROUP T* first;
  FA_THREADGROUP T* second;
  FA_THREADGROUP T* operands;
  FA_THREADGROUP T* dq;
};

/// Where a threadgroup works: its block (of keys for dK/dV, of queries for
/// dQ), its head (the key/value head for dK/dV, the query head for dQ) and
/// its batch entry.
struct AttnBwdPlace {
  int block;
  int head;
  int batch;
};

/// Where a warp of a row kernel (the row dot, the one-kernel form's dQ
/// zeroing and conversion) works: one query row of (batch, head).
struct AttnBwdRow {
  int row;
  int head;
  int batch;
};

/// Where row `r` starts in an array of `strides` (batch, head, row).
FA_FUNC stride_t attention_bwd_row_offset(
    const FA_CONSTANT stride_t* strides,
    AttnBwdRow r) {
  return r.batch * strides[0] + r.head * strides[1] + r.row * strides[2];
}

/// Row `r` among the [B, H_q, L_q] rows of the LSE, D and the dQ
/// accumulator (backward_params.h).
FA_FUNC stride_t attention_bwd_row_index(
    const FA_CONSTANT AttnParams& p,
    AttnBwdRow r) {
  return (stride_t(r.batch) * p.H_q + r.head) * p.L_q + r.row;
}

} // namespace fa
