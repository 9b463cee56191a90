// CUDA entry point of the fused attention kernel. The body is
// mlx_fused_attn/kernels/attention.h, the same one Metal runs; this file
// only declares the shared memory, fills the features and picks the body's
// policies: the target's mainloop and epilogue (AttnParts) and the tile
// scheduler: the static one over the grid's blocks in CUDA's order, or, for
// the producer kernel with persistent tiles, the persistent one
// (persistent_scheduler.cuh).
//
// Template: element type, head dims (D of q and k, DV of v), tiles (a type
// whose `value` is an AttnTiles, kernel_tiles.h; wgmma: warpgroup products,
// CudaWgmmaTarget; q_shared: with Q in shared memory,
// CudaWgmmaSharedQTarget or, without wgmma, CudaSharedQTarget; producer: a
// producer warpgroup, attention_producer_kernel below) and the two
// features that change the inner loop's code: causal and an array mask. The others (bool or additive mask,
// sinks, aligned lengths) arrive at run time in `features`: they decide once
// per block or per kernel, so specialising them would only multiply the
// instances that nvcc and NVRTC build.
//
// Grid: (query blocks * splits, H_q, B), causal ones taken heaviest first
// (grid_order.cuh), or with persistent tiles (blocks, 1, 1), which walk
// that grid's tiles in the same order; block: attention_launch_warps(tiles) * 32 threads; dynamic
// shared memory: attention_smem_bytes(tiles, D, DV, dtype, Backend::Cuda).
// With split keys (split_keys.h, features.split_keys) the kernel writes
// n_splits partials to o_part and stats (split_keys.h), the split being the
// block index modulo n_splits; with split_counters (zeroed, one a query
// block, head and batch; attention_kernel's instances take them where
// their tiles set split_merge) the last split of each merges them into the
// output and lse (kernels/cuda/split_merge.cuh), without, split_combine_kernel
// does. lse: the rows' log-sum-exp (fp32 [B, H_q, L_q]) where
// features.has_lse.
#pragma once

#include "mlx_fused_attn/kernels/cuda/block_sizes.h"
#include "mlx_fused_attn/kernels/cuda/grid_order.cuh"
#include "mlx_fused_attn/kernels/cuda/kernel_tiles.h"
#include "mlx_fused_attn/kernels/cuda/split_combine.cuh"
#include "mlx_fused_attn/kernels/cuda/persistent_scheduler.cuh"
#include "mlx_fused_attn/kernels/cuda/split_merge.cuh"
#include "mlx_fused_attn/kernels/attention.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/split_keys.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/cuda_target.h"
#include "mlx_fused_attn/tile/dtype_of.h"

namespace fa {

/// Whether the shared memory the host gives an instance
/// (attention_smem_bytes) is exactly that of its blocks. A variable, so that
/// the host function is evaluated outside the kernel.
template <typename Target, typename Shape, typename Tiles>
constexpr bool kSmemBytesAgree =
    attention_smem_bytes(
        Tiles::value,
        Shape::kHeadDim,
        Shape::kHeadDimV,
        DTypeOf<typename Shape::elem_type>::value,
        Backend::Cuda) ==
    int(sizeof(typename Shape::elem_type)) *
            (Shape::kStages *
                 (AttnKBlock<Target, Shape>::kElems +
                  AttnVBlock<Target, Shape>::kElems) +
             AttnQOperand<Target, Shape>::kSmemElems) +
        (Tiles::value.producer ? kKVTmaSyncBytes : 0);

/// What one (head, batch) row of the grid streams: a query head its share
/// of its key/value head's K and V.
template <typename T, int D, int DV>
__device__ __forceinline__ stride_t attention_row_bytes(const AttnParams& params) {
  return stride_t(params.L_k) * (D + DV) * sizeof(T) / params.gqa_factor;
}

/// The features that the instance fixes at compile time, and the tile
/// scheduler of CUDA's grid (attention_scheduler.h): the static one, over
/// the grid's blocks taken heaviest first where the work falls by query
/// block (grid_order.cuh).
template <typename T, int D, int DV, bool kCausal, bool kHasMask>
__device__ __forceinline__ AttnStaticScheduler attention_grid_scheduler(
    AttnFeatures& features,
    const AttnParams& params,
    int n_splits) {
  const bool by_weight = attention_fix_features<kCausal, kHasMask>(features);
  const GridBlock g = grid_block<Heaviest::Last>(
      by_weight, attention_row_bytes<T, D, DV>(params));
  return attention_static_scheduler(g.x, g.head, g.batch, n_splits);
}

/// The same features, and the persistent scheduler of the work tiles that
/// the static grid of `Tiles` would launch (persistent_scheduler.cuh).
template <
    typename T,
    int D,
    int DV,
    typename Tiles,
    bool kCausal,
    bool kHasMask>
__device__ __forceinline__ AttnPersistentScheduler
attention_persistent_scheduler(
    AttnFeatures& features,
    const AttnParams& params,
    int n_splits) {
  const AttnPersistentScheduler s = {
      (params.L_q + Tiles::value.bq - 1) / Tiles::value.bq * n_splits,
      params.H_q,
      params.B,
      n_splits,
      attention_fix_features<kCausal, kHasMask>(features),
      attention_row_bytes<T, D, DV>(params)};
  return s;
}

/// What the two entry points below share, for an instance whose blocks
/// `Target` lays out: its shape and the target's parts, the check of its
/// shared memory, the tile scheduler its tiles ask for, the K and V stages
/// in the shared memory, and the body's run with the split keys' merge.
template <
    typename T,
    int D,
    int DV,
    typename Tiles,
    typename Target,
    bool kCausal,
    bool kHasMask>
struct AttnCudaInstance {
  static constexpr AttnTiles t = Tiles::value;
  typedef AttnShape<T, D, t.bq, t.bk, t.warps, t.stages, DV> Shape;
  typedef AttnParts<Target, Shape> Parts;
  static_assert(
      kSmemBytesAgree<Target, Shape, Tiles>,
      "attention_smem_bytes disagrees with the kernel's blocks");

  /// The persistent scheduler where the tiles say so
  /// (AttnTiles::persistent), else the static one; both fix the features
  /// that the instance fixes.
  static __device__ __forceinline__ auto scheduler(
      AttnFeatures& features,
      const AttnParams& params,
      int n_splits) {
    if constexpr (t.persistent) {
      return attention_persistent_scheduler<T, D, DV, Tiles, kCausal, kHasMask>(
          features, params, n_splits);
    } else {
      return attention_grid_scheduler<T, D, DV, kCausal, kHasMask>(
          features, params, n_splits);
    }
  }

  /// K's stages and V's, from the start of the dynamic shared memory; the
  /// schedule's barriers and Q, where kept there, follow V's
  /// (attention_smem_bytes).
  static __device__ __forceinline__ AttnSmem<T> smem() {
    // 1024 bytes: the swizzled blocks' pattern is anchored to address bits.
    extern __shared__ __align__(1024) unsigned char attention_smem[];
    T* k_smem = reinterpret_cast<T*>(attention_smem);
    const AttnSmem<T> s = {
        k_smem, k_smem + t.stages * AttnKBlock<Target, Shape>::kElems};
    return s;
  }

  /// attention_body over the tiles of `sched`. Its epilogue merges split
  /// keys where the call binds split_counters (split_merge.cuh) in the
  /// producer kernel and in the instances whose tiles set split_merge only:
  /// the merge's code, though never run, moved the others' key loop.
  template <typename Scheduler>
  static __device__ __forceinline__ void body(
      const typename Parts::Mainloop& mainloop,
      const AttnArrays<T>& arrays,
      const AttnParams& params,
      const AttnFeatures& features,
      const Scheduler& sched,
      int warp) {
    if constexpr (t.producer || t.split_merge) {
      attention_body<AttnSplitMergeEpilogue<typename Parts::Epilogue, Shape>>(
          mainloop, arrays, params, features, sched, warp,
          threadIdx.x % kSimdWidth);
    } else {
      attention_body<typename Parts::Epilogue>(
          mainloop, arrays, params, features, sched, warp,
          threadIdx.x % kSimdWidth);
    }
  }
};

template <
    typename T,
    int D,
    int DV,
    typename Tiles,
    bool kCausal,
    bool kHasMask>
__global__ void __launch_bounds__(
    Tiles::value.warps * kSimdWidth,
    Tiles::value.min_blocks) attention_kernel(
    const T* q,
    const T* k,
    const T* v,
    T* out,
    const AttnParams params,
    const unsigned char* mask,
    const T* sinks,
    AttnFeatures features,
    float* o_part,
    float* stats,
    unsigned int* split_counters,
    int n_splits,
    float* lse,
    const unsigned int* mask_blocks) {
  // A warpgroup-product instance exists in every architecture's image of a
  // fat binary, but the host launches it only on sm_90a (kernels.h,
  // has_wgmma).
  constexpr AttnTiles t = Tiles::value;
  static_assert(!t.persistent, "a persistent grid needs the producer kernel");
  if constexpr (t.wgmma && !FA_HAS_WGMMA) {
    __trap();
  } else {
    // The second key loop where a thread has registers for it: 168 or more,
    // O taking at most 64 (ptxas -v showed more spills elsewhere).
    typedef WithZeroStartLoop<
        typename CudaTargetOf<t.wgmma, t.q_shared>::type,
        t.wgmma && DV <= 128 &&
            65536 / (t.warps * kSimdWidth * t.min_blocks) >= 168>
        Target;
    typedef AttnCudaInstance<T, D, DV, Tiles, Target, kCausal, kHasMask> I;
    const AttnSmem<T> smem = I::smem();
    const auto sched = I::scheduler(features, params, n_splits);
    const AttnArrays<T> arrays = {
        q, k, v, out, mask, sinks, lse, mask_blocks, o_part, stats,
        split_counters};
    I::body(
        I::Parts::mainloop(arrays, smem), arrays, params, features, sched,
        threadIdx.x / kSimdWidth);
  }
}

/// The kernel of tiles with a producer warpgroup (AttnTiles::producer,
/// sm_90a): its arguments are attention_kernel's and the tensor maps of K
/// and V (attention_cuda.cpp: 4-D, {head dim, keys, heads, batch}, boxes
/// of one 128-byte panel by bk keys, 128-byte swizzle, which is the
/// swizzled blocks' layout). Warps 0-3 are the producer, whose one thread
/// copies the blocks (tile/kv_tma_ring.h, attention_produce); the others run
/// attention_body.
/// Shared memory: K's stages, V's, the ring's barriers, Q.
template <
    typename T,
    int D,
    int DV,
    typename Tiles,
    bool kCausal,
    bool kHasMask>
__global__ void __launch_bounds__(
    attention_launch_warps(Tiles::value) * kSimdWidth,
    Tiles::value.min_blocks) attention_producer_kernel(
    const T* q,
    const T* k,
    const T* v,
    T* out,
    const AttnParams params,
    const unsigned char* mask,
    const T* sinks,
    AttnFeatures features,
    float* o_part,
    float* stats,
    unsigned int* split_counters,
    int n_splits,
    float* lse,
    const unsigned int* mask_blocks,
    const __grid_constant__ TmaMap k_map,
    const __grid_constant__ TmaMap v_map) {
  constexpr AttnTiles t = Tiles::value;
  if constexpr (!FA_HAS_WGMMA) {
    __trap();
  } else {
    // A persistent grid's ring runs on across its tiles.
    typedef typename CudaTmaTargetOf<t.persistent>::type Target;
    typedef AttnCudaInstance<T, D, DV, Tiles, Target, kCausal, kHasMask> I;
    static_assert(t.producer && t.wgmma && t.q_shared, "producer tiles only");
    static_assert(
        !t.split_merge,
        "the producer kernel always merges: its tiles leave split_merge off");
    static_assert(
        kKVTmaSyncBytes == kProducerSyncBytes,
        "the host and the ring disagree on the barriers' bytes");
    // The producer's 24 registers a thread leave the math's warpgroups the
    // rest of the multiprocessor's 64K, a multiple of 8 (setmaxnreg's unit),
    // up to setmaxnreg's 256 (one math warpgroup alone on a multiprocessor
    // leaves more).
    constexpr int kProducerRegs = 24;
    constexpr int kFreeMathRegs =
        (65536 / t.min_blocks - int(kProducerWarps) * kSimdWidth * kProducerRegs) /
        (t.warps * kSimdWidth) / 8 * 8;
    constexpr int kMathRegs = kFreeMathRegs < 256 ? kFreeMathRegs : 256;
    static_assert(
        kMathRegs >= 160,
        "more than the launch gives (168 a thread at 384, 160 at 512)");

    const AttnSmem<T> smem = I::smem();
    KVTmaBarriers<t.stages>* bars =
        reinterpret_cast<KVTmaBarriers<t.stages>*>(
            attention_sync_smem<Target, typename I::Shape>(smem.v));
    const auto sched = I::scheduler(features, params, n_splits);
    const AttnArrays<T> arrays = {
        q, k, v, out, mask, sinks, lse, mask_blocks, o_part, stats,
        split_counters};
    const typename I::Parts::Mainloop mainloop =
        I::Parts::mainloop(arrays, smem);
    const int warp = threadIdx.x / kSimdWidth;
    if (threadIdx.x == 0) {
      kv_tma_init(bars, t.warps);
    }
    __syncthreads();
    if (warp < kProducerWarps) {
      warpgroup_registers_decrease<kProducerRegs>();
      if (threadIdx.x == 0) {
        const KVTmaMaps maps = {&k_map, &v_map};
        attention_produce(maps, mainloop, arrays, params, features, sched);
      }
      return;
    }
    warpgroup_registers_increase<kMathRegs>();
    I::body(
        mainloop, arrays, params, features, sched, warp - kProducerWarps);
  }
}

/// The combine of split keys (split_keys.h) into the output, in the form
/// the plan picks (split_combine_form.h; its grid: split_combine_block).
template <typename T, SplitCombineForm kForm>
__global__ void __launch_bounds__(kSplitCombineThreads) split_combine_kernel(
    const float* o_part,
    const float* stats,
    T* out,
    const AttnParams params,
    int n_splits) {
  split_combine_block<T, kForm>(o_part, stats, out, params, n_splits);
}

} // namespace fa
