// Compile-time choices of the short-sequence attention kernel
// (short_attention.h), shared by the host dispatch of both GPU backends, the
// instantiation lists and the kernels' static_asserts: which calls it takes
// (the dispatch rule) and which tiles each (head dim, dtype, backend,
// sequence capacity) runs with.
//
// The general kernel (attention_config.h) gives every (batch, head) its own
// threadgroups and streams K and V through a running softmax. With L <= 64
// and thousands of sequences that leaves it far from the memory floor: most
// of a 128-row query block is empty, and every sequence pays a threadgroup
// and a softmax rescale. The short kernel holds Q, K and V of one or several
// sequences whole in threadgroup memory and does one softmax pass.
#pragma once

#include "mlx_fused_attn/tile/platform.h"

namespace fa {

struct ShortAttnTiles {
  int seq; ///< rows held per sequence: L_q and L_k are at most this
  int warp_rows; ///< query rows one simdgroup (warp) computes at a time
  int warps; ///< simdgroups (warps) per threadgroup
  int problems; ///< (batch, head) sequences per threadgroup
};

constexpr bool operator==(ShortAttnTiles a, ShortAttnTiles b) {
  return a.seq == b.seq && a.warp_rows == b.warp_rows &&
      a.warps == b.warps && a.problems == b.problems;
}

/// Head dims with a short kernel (q, k and v share one), and the sequence
/// capacities it is built for, ascending, as X-macros: the instantiation
/// lists expand them and cmake/cuda.cmake reads the head dim line.
#define FA_SHORT_ATTENTION_HEAD_DIMS(X) X(32) X(64) X(128)
#define FA_SHORT_ATTENTION_SEQS(X) X(16) X(32) X(48) X(64)

constexpr bool short_attention_head_dim_supported(int head_dim) {
#define FA_SHORT_HEAD_DIM_EQUALS(d) head_dim == d ||
  return FA_SHORT_ATTENTION_HEAD_DIMS(FA_SHORT_HEAD_DIM_EQUALS) false;
#undef FA_SHORT_HEAD_DIM_EQUALS
}

/// The smallest capacity that holds both lengths, or 0 when none does. A
/// tight capacity keeps the score tile (and the zero-filled rows) small.
constexpr int short_attention_seq(int L_q, int L_k) {
  const int length = L_q > L_k ? L_q : L_k;
#define FA_SHORT_SEQ_FITS(s) length <= s ? s:
  return FA_SHORT_ATTENTION_SEQS(FA_SHORT_SEQ_FITS) 0;
#undef FA_SHORT_SEQ_FITS
}

/// Threadgroup memory of one sequence: its Q, K and V blocks, each row padded
/// by 16 bytes (ShortShape::kSmemLd) against bank conflicts.
constexpr int short_attention_problem_bytes(int seq, int head_dim, DType dtype) {
  return 3 * seq * (head_dim * dtype_size(dtype) + 16);
}

enum {
  /// Shared memory the CUDA chooser fills with sequences at 16 and 64 rows.
  kCudaShortBlockBytes = 32768,
};

/// The one tile chooser of the short kernel (docs/gpu_kernels.md, "Why these
/// tiles"). Each simdgroup (warp) computes one fragment row of queries of one
/// sequence at a time against all its keys, walking over the (sequence, row
/// group) pairs of its threadgroup; all threads share the copies.
constexpr ShortAttnTiles choose_short_attention_tiles(
    int head_dim,
    DType dtype,
    Backend backend,
    int seq) {
  // One sequence of 32 rows a block measured best; its 4 warps share the
  // copies even where 2 of them have no row group.
  if (backend == Backend::Cuda && seq == 32) {
    return ShortAttnTiles{seq, 16, 4, 1};
  }
  // One sequence of 48 rows a block, a warp per row group, measured best.
  if (backend == Backend::Cuda && seq == 48) {
    return ShortAttnTiles{seq, 16, 3, 1};
  }
  // Elsewhere as many sequences (at most 8) as fill the budget, so that each
  // threadgroup keeps the most bytes in flight (unmeasured on a Mac).
  const int per_problem = short_attention_problem_bytes(seq, head_dim, dtype);
  // Two enums: compared as ints (-Wenum-compare).
  const int budget = backend == Backend::Metal
      ? static_cast<int>(kMetalMaxThreadgroupBytes)
      : static_cast<int>(kCudaShortBlockBytes);
  int problems = budget / per_problem;
  problems = problems < 1 ? 1 : (problems > 8 ? 8 : problems);
  return ShortAttnTiles{seq, backend == Backend::Metal ? 8 : 16, 4, problems};
}

constexpr int short_attention_smem_bytes(
    ShortAttnTiles tiles,
    int head_dim,
    DType dtype) {
  return tiles.problems *
      short_attention_problem_bytes(tiles.seq, head_dim, dtype);
}

/// Whether the backend builds a short kernel for (head dim, dtype, capacity):
/// on Metal, one sequence must fit the threadgroup memory (a CUDA device's
/// limit is known only at run time; its host code checks it).
constexpr bool short_attention_instantiated(
    int head_dim,
    DType dtype,
    Backend backend,
    int seq) {
  return short_attention_head_dim_supported(head_dim) &&
      (backend == Backend::Cuda ||
       short_attention_problem_bytes(seq, head_dim, dtype) <=
           kMetalMaxThreadgroupBytes);
}

/// The dispatch rule: the short kernel runs every call whose lengths fit a
/// capacity (L_q, L_k <= 64) and whose head dim, shared by q, k and v, has an
/// instance. There it does the general kernel's work with fuller
/// threadgroups and no softmax rescale, and measured faster whatever the
/// batch (benchmarks/gpu_bench.py --short).
constexpr bool short_attention_covers(
    int L_q,
    int L_k,
    int head_dim,
    int head_dim_v,
    DType dtype,
    Backend backend) {
  const int seq = short_attention_seq(L_q, L_k);
  return seq != 0 && head_dim == head_dim_v &&
      short_attention_instantiated(head_dim, dtype, backend, seq);
}

} // namespace fa
