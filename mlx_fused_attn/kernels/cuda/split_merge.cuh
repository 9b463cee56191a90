// Split keys in one kernel on CUDA (split_keys.h): the last split of each
// work tile (query block, head, batch) to finish merges every split's
// partials into the output, and the log-sum-exp where the call asks for it,
// in place of a second kernel (the combine). An epilogue of the attention
// body (attention_epilogue.h) that wraps the one storing the split's
// partials.
//
// The order it relies on: each thread of a split makes its partial stores
// visible to the whole GPU (__threadfence) before the split counts itself
// done (one atomicAdd on the tile's counter, after a barrier of the math
// warps); the split that counts n_splits - 1 saw every other split's count,
// and so, after its own fence, reads every split's partials as written.
// The counters are the call's own: zeroed as their memory is made
// (backend/cuda/device_buffer.h), as CUDA graphs run independent calls
// side by side. Metal keeps the combine kernel: Apple documents no
// ordering of one threadgroup's device-memory writes before another's reads
// inside one dispatch that such a count could rely on.
#pragma once

#include "mlx_fused_attn/kernels/attention_args.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/split_keys.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/tma.h"

namespace fa {

/// The named barrier of the math warps' count: named, not __syncthreads
/// (0), as a producer warpgroup has returned by the epilogue. The TMA
/// ring's consumer barrier (kv_tma_ring.h) is the same one over the same
/// threads, which have all passed its last use; a new id would add a
/// barrier to each kernel's count.
constexpr int kSplitMergeBarrier = 1;

/// The output elements a thread merges at once: 4 chains of loads in
/// flight where a threadgroup merges its rows alone (the combine kernel
/// gives each element a thread).
constexpr int kMergeElems = 4;

/// Whether `pred` holds in any of the `threads` threads (whole warps) that
/// reach named barrier `id`, each of which waits for all.
__device__ __forceinline__ bool
named_barrier_any(int id, int threads, bool pred) {
  unsigned int any;
  asm volatile(
      "{\n"
      "  .reg .pred in, out;\n"
      "  setp.ne.u32 in, %1, 0;\n"
      "  bar.red.or.pred out, %2, %3, in;\n"
      "  selp.u32 %0, 1, 0, out;\n"
      "}\n"
      : "=r"(any)
      : "r"(unsigned(pred)), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
}

/// The counter of work tile `at` among the call's ceil(L_q / kBQ) * H_q * B
/// (the host makes that many, attention_cuda.cpp's split_counter_count).
template <int kBQ>
__device__ __forceinline__ stride_t
split_counter(const AttnParams& p, AttnPlace at) {
  const int q_blocks = (p.L_q + kBQ - 1) / kBQ;
  return (stride_t(at.batch) * p.H_q + at.head) * q_blocks + at.q_block;
}

/// Counts this split of work tile `at` done (thread `tid` of the kThreads
/// math threads, every one of which has stored its partials) and, in the
/// last split, merges the tile's rows: the output, and the LSE where
/// has_lse.
template <int kBQ, int kThreads, typename T>
__device__ void split_merge_if_last(
    AttnArrays<T> a,
    const AttnParams& p,
    AttnFeatures f,
    AttnPlace at,
    int tid) {
  __threadfence();
  named_barrier(kSplitMergeBarrier, kThreads);
  bool last = false;
  if (tid == 0) {
    last = atomicAdd(a.split_counters + split_counter<kBQ>(p, at), 1u) ==
        unsigned(at.split.count - 1);
  }
  if (!named_barrier_any(kSplitMergeBarrier, kThreads, last)) {
    return;
  }
  __threadfence();
  const int row0 = at.q_block * kBQ;
  const int rows = min(kBQ, p.L_q - row0);
  // The tile's rows only: the next query block's are its last split's.
  const int end = (row0 + rows) * p.D_v;
  for (int i = row0 * p.D_v + tid; i < end; i += kMergeElems * kThreads) {
    const SplitElems e = {i, kThreads, end, at.head, at.batch};
    split_combine_elements<kMergeElems>(
        a.split_o, a.split_stats, a.out, p, at.split.count, e);
  }
  if (f.has_lse) {
    for (int r = tid; r < rows; r += kThreads) {
      split_combine_lse(
          a.split_stats, a.lse, p, at.split.count, row0 + r, at.head,
          at.batch);
    }
  }
}

/// The epilogue of split keys in one kernel: `Partials`, the body's own
/// epilogue (AttnEpilogue, which stores a split's partials), then the
/// merge where the call has counters (a.split_counters; without them the
/// combine kernel merges). `Shape` is the body's (AttnShape).
template <typename Partials, typename Shape>
struct AttnSplitMergeEpilogue {
  template <typename Step>
  static __device__ __forceinline__ void store(
      Step& st,
      AttnArrays<typename Shape::elem_type> a,
      const AttnParams& p,
      AttnFeatures f,
      AttnPlace at,
      AttnWarpRows w,
      lane_t lane) {
    Partials::store(st, a, p, f, at, w, lane);
    if (f.split_keys && a.split_counters != nullptr) {
      split_merge_if_last<Shape::kBQ, Shape::kThreads>(
          a, p, f, at, w.warp * kSimdWidth + lane);
    }
  }
};

} // namespace fa
