// The arguments of the attention body (attention.h), gathered once in each
// entry point (families/attention/attention.metal and attention_kernel.cuh)
// from its bindings and read by name in the body: the arrays one call reads
// and writes, the threadgroup memory of the K and V stages, and where in the
// grid a threadgroup works. Every pointer names its address space, as Metal
// requires of a pointer in a struct (MLX's steel BlockLoader holds its
// device and threadgroup pointers the same way).
#pragma once

#include "mlx_fused_attn/kernels/split_keys.h"
#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// The arrays of one attention call. The optional ones are read only where
/// the features say (has_mask, has_sinks, has_lse, mask_blocks,
/// split_keys) and may be unbound otherwise.
template <typename T>
struct AttnArrays {
  const FA_DEVICE T* q;
  const FA_DEVICE T* k;
  const FA_DEVICE T* v;
  FA_DEVICE T* out;
  const FA_DEVICE unsigned char* mask; ///< bool, or T, as bool_mask says
  const FA_DEVICE T* sinks; ///< [H_q]
  FA_DEVICE float* lse; ///< fp32 [B, H_q, L_q] (backward_params.h)
  const FA_DEVICE unsigned int* mask_blocks; ///< kernels/mask_visits.h
  FA_DEVICE float* split_o; ///< the splits' partial outputs (split_keys.h)
  FA_DEVICE float* split_stats; ///< their row maxima, then row sums
  /// With split keys on CUDA, one zeroed counter a (query block, head,
  /// batch), through which the last split to finish merges the partials
  /// (kernels/cuda/split_merge.cuh); null: a combine kernel merges them
  /// (Metal always, CUDA as the plan says).
  FA_DEVICE unsigned int* split_counters;
};

/// K's stages and V's (Q's rows, where the target keeps Q there, and the
/// schedule's own memory follow V's).
template <typename T>
struct AttnSmem {
  FA_THREADGROUP T* k;
  FA_THREADGROUP T* v;
};

/// Where a threadgroup works (a work tile, attention_scheduler.h): its split
/// of the query block's keys (split_keys.h), the query block, the head and
/// the batch entry.
struct AttnPlace {
  AttnSplit split;
  int q_block;
  int head;
  int batch;
};

/// A warp's share of a work tile: the warp, its first query row and
/// whether the query block is the ragged last one (its rows past L_q are
/// neither read nor stored).
struct AttnWarpRows {
  int warp;
  int q_row0;
  bool q_ragged;
};

} // namespace fa
