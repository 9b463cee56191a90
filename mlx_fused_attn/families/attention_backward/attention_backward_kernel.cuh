// CUDA entry points of the fused attention backward. The bodies are
// mlx_fused_attn/families/attention_backward/attention_backward.h, the ones Metal runs; this
// file declares the shared memory, fills the features and maps the grid.
// The products are each warp's mma.sync on padded blocks or, on sm_90a,
// the warpgroup products on swizzled ones (AttnTiles::wgmma), with the
// owned rows' operands in registers or shared memory (AttnTiles::q_shared):
// CudaTargetOf.
//
// Template: element type, head dim (of q, k and v), tiles (AttnTilesOf,
// kernel_tiles.h, from choose_attention_backward_tiles) and the features
// that change the inner loop's code (causal, an array mask); the others
// arrive in `features`. The dK/dV and dQ kernels take one AttnBwdKernelArgs
// (attention_backward_kernel_args.h), read at their top into the locals
// the bodies take.
//
// attention_bwd_row_dot_kernel: grid (ceil(L_q / warps), H_q, B), a warp a
//   row; it also zeroes the one-kernel form's dQ accumulator where given.
// attention_bwd_dkdv_kernel: grid (ceil(L_k / bq), H_kv, B); with
//   kDqAtomics it also adds dS K into the dQ accumulator (the one-kernel
//   form, attention_backward_dq_atomics.h), and no dQ kernel runs.
// attention_bwd_dq_kernel: grid (ceil(L_q / bq), H_q, B).
// attention_bwd_dq_convert_kernel: grid as the row dot's; dQ from the
//   accumulator.
// Causal, the threadgroups take them heaviest block first (grid_order.cuh).
// Blocks of warps * 32 threads; dynamic shared memory of dK/dV and dQ:
// attention_backward_smem_bytes(tiles, D, dtype, Backend::Cuda, kDqAtomics).
#pragma once

#include "mlx_fused_attn/kernels/cuda/grid_order.cuh"
#include "mlx_fused_attn/kernels/cuda/kernel_tiles.h"
#include "mlx_fused_attn/families/attention_backward/backward_params.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_config.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_dq_atomics.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_kernel_args.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/tile/cuda_target.h"
#include "mlx_fused_attn/tile/dtype_of.h"

namespace fa {

/// The dK/dV body's Dq policy (attention_backward.h): dQ through atomics
/// in the one-kernel form, nothing in the two-kernel one.
template <typename Target, typename Shape, bool kDqAtomics>
struct BwdDqOf {
  typedef BwdNoDq type;
};
template <typename Target, typename Shape>
struct BwdDqOf<Target, Shape, true> {
  typedef BwdDqAtomics<Target, Shape> type;
};

/// The shape of a backward instance, its streamed block and the shared
/// memory the host gives it, checked against the chooser's count.
template <typename T, int D, typename Tiles, bool kDqAtomics = false>
struct AttnBwdInstance {
  static constexpr AttnTiles t = Tiles::value;
  typedef AttnShape<T, D, t.bq, t.bk, t.warps, t.stages> Shape;
  typedef typename CudaTargetOf<t.wgmma, t.q_shared>::type Target;
  typedef AttnKBlock<Target, Shape> Block;
  typedef AttnQOperand<Target, Shape> Operand;
  typedef typename BwdDqOf<Target, Shape, kDqAtomics>::type Dq;
  static_assert(
      attention_backward_smem_bytes(
          t, D, DTypeOf<T>::value, Backend::Cuda, kDqAtomics) ==
          int(sizeof(T)) *
              (2 * (t.stages * Block::kElems + Operand::kSmemElems) +
               Dq::kSmemElems),
      "attention_backward_smem_bytes disagrees with the kernel's blocks");
};

/// Fixes the features that the instance fixes, and gives where this
/// threadgroup of the dK/dV or dQ grid works: its blocks taken heaviest
/// first, the heaviest at kAt, where the work falls by block
/// (grid_order.cuh). `row_bytes`: what one (head, batch) row of the grid
/// streams.
template <Heaviest kAt, bool kCausal, bool kHasMask>
__device__ __forceinline__ AttnBwdPlace attention_bwd_place(
    AttnFeatures& features,
    stride_t row_bytes) {
  const GridBlock g = grid_block<kAt>(
      attention_fix_features<kCausal, kHasMask>(features), row_bytes);
  const AttnBwdPlace p = {g.x, g.head, g.batch};
  return p;
}

/// The row of a row kernel's warp: grid (ceil(L_q / kWarps), H_q, B), a
/// warp a row.
template <int kWarps>
__device__ __forceinline__ AttnBwdRow attention_bwd_warp_row() {
  const AttnBwdRow r = {
      int(blockIdx.x * kWarps + threadIdx.x / kSimdWidth), int(blockIdx.y),
      int(blockIdx.z)};
  return r;
}

template <int kWarps, typename T>
__global__ void __launch_bounds__(kWarps * kSimdWidth)
    attention_bwd_row_dot_kernel(
        const T* o,
        const T* dout,
        float* d,
        float* dq_acc,
        const AttnBwdParams params) {
  const AttnBwdRow r = attention_bwd_warp_row<kWarps>();
  attention_backward_row_dot(
      o, dout, d, params, r, threadIdx.x % kSimdWidth);
  if (dq_acc != nullptr) {
    attention_backward_zero_dq_row(
        dq_acc, params.fwd, r, threadIdx.x % kSimdWidth);
  }
}

template <int kWarps, typename T>
__global__ void __launch_bounds__(kWarps * kSimdWidth)
    attention_bwd_dq_convert_kernel(
        const float* dq_acc,
        T* dq,
        const AttnBwdParams params) {
  attention_backward_convert_dq_row(
      dq, dq_acc, params, attention_bwd_warp_row<kWarps>(),
      threadIdx.x % kSimdWidth);
}

template <
    typename T,
    int D,
    typename Tiles,
    bool kCausal,
    bool kHasMask,
    bool kDqAtomics = false>
__global__ void __launch_bounds__(Tiles::value.warps * kSimdWidth)
    attention_bwd_dkdv_kernel(const AttnBwdKernelArgs<T> args) {
  typedef AttnBwdInstance<T, D, Tiles, kDqAtomics> I;
  // 1024 bytes: the swizzled blocks' pattern is anchored to address bits.
  extern __shared__ __align__(1024) unsigned char attention_bwd_smem[];
  // A warpgroup-product instance is launched only on sm_90a (as the
  // forward's, attention_kernel.cuh).
  if constexpr (I::t.wgmma && !FA_HAS_WGMMA) {
    __trap();
  } else {
    T* q_smem = reinterpret_cast<T*>(attention_bwd_smem);
    T* do_smem = q_smem + I::t.stages * I::Block::kElems;
    T* operand_smem = do_smem + I::t.stages * I::Block::kElems;
    const AttnBwdParams& params = args.params;
    AttnFeatures features = args.features;
    // A key/value head streams Q and dO of its group's query heads.
    const AttnBwdPlace place =
        attention_bwd_place<Heaviest::First, kCausal, kHasMask>(
            features,
            stride_t(params.fwd.L_q) * 2 * D * sizeof(T) *
                params.fwd.gqa_factor);
    const AttnBwdArrays<T> arrays = {
        args.q, args.k, args.v, args.dout, args.lse, args.d, nullptr,
        args.dk, args.dv, args.mask, args.lists, args.dq_acc};
    const AttnBwdSmem<T> smem = {
        q_smem, do_smem, operand_smem,
        operand_smem + 2 * I::Operand::kSmemElems};
    attention_backward_dkdv<
        typename I::Target, typename I::Shape, typename I::Dq>(
        arrays, params, smem, features, place, threadIdx.x / kSimdWidth,
        threadIdx.x % kSimdWidth);
  }
}

template <typename T, int D, typename Tiles, bool kCausal, bool kHasMask>
__global__ void __launch_bounds__(Tiles::value.warps * kSimdWidth)
    attention_bwd_dq_kernel(const AttnBwdKernelArgs<T> args) {
  typedef AttnBwdInstance<T, D, Tiles> I;
  // 1024 bytes: the swizzled blocks' pattern is anchored to address bits.
  extern __shared__ __align__(1024) unsigned char attention_bwd_smem[];
  if constexpr (I::t.wgmma && !FA_HAS_WGMMA) {
    __trap();
  } else {
    T* k_smem = reinterpret_cast<T*>(attention_bwd_smem);
    T* v_smem = k_smem + I::t.stages * I::Block::kElems;
    T* operand_smem = v_smem + I::t.stages * I::Block::kElems;
    const AttnBwdParams& params = args.params;
    AttnFeatures features = args.features;
    // A query head streams its share of its key/value head's K and V.
    const AttnBwdPlace place =
        attention_bwd_place<Heaviest::Last, kCausal, kHasMask>(
            features,
            stride_t(params.fwd.L_k) * 2 * D * sizeof(T) /
                params.fwd.gqa_factor);
    const AttnBwdArrays<T> arrays = {
        args.q, args.k, args.v, args.dout, args.lse, args.d, args.dq,
        nullptr, nullptr, args.mask, args.lists, nullptr};
    const AttnBwdSmem<T> smem = {k_smem, v_smem, operand_smem, nullptr};
    attention_backward_dq<typename I::Target, typename I::Shape>(
        arrays, params, smem, features, place, threadIdx.x / kSimdWidth,
        threadIdx.x % kSimdWidth);
  }
}

} // namespace fa
