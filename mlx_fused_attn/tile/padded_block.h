// A block of rows (a K or V block of the attention kernels) in threadgroup
// memory with padded rows (smem_layout.h's PaddedRows), read one fragment at
// a time by each simdgroup (warp) on its own: Metal's simdgroup matrices and
// CUDA's mma.sync. Hopper's warpgroup products read swizzled_block.h's
// layout instead; a kernel body sees the same interface in both:
//
//   kElems                          elements of one block in threadgroup memory
//   kProductWarps                   warps that must call the products together
//   load, load_safe, load_row,      its device-to-threadgroup copy (the
//   commit, wait                    loader)
//   mma_abt(s, q, block, lane)      S += Q B^T, B the block (a key per row),
//                                   Q a q_in_registers.h, q_in_shared.h or
//                                   q_in_padded_shared.h
//   mma_ab(o, p, block, lane)       O += P B
//   mma_abt_pair, mma_ab_pair       two independent products of either
//                                   kind (the backward's S and dP, dV and
//                                   dK), which warpgroup products wait for
//                                   together
//
// `Target` supplies the B fragment type and the loader.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/q_in_padded_shared.h"
#include "mlx_fused_attn/tile/q_in_registers.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/tile_math.h"

namespace fa {

/// 16 bytes of padding per row (kLd) spread the rows that one fragment load
/// reads over the banks (as in MLX's steel kernels). The copy is the
/// target's loader, whose load, load_safe, commit and wait the block
/// inherits; of the kCols columns the first kSrcCols are copied, the rest
/// zero-filled.
template <
    typename Target,
    typename T,
    int kRows,
    int kCols,
    int kSrcCols,
    int kThreads,
    int kLd = kCols + 16 / int(sizeof(T))>
struct PaddedBlock
    : Target::template Loader<T, kRows, kCols, kLd, kThreads, kSrcCols> {
  FA_CONST int kElems = kRows * kLd;
  /// Elements from one row to the next: rows r onwards are a block of the
  /// same kind (a warp's share of the keys, kernels/key_slices.h).
  FA_CONST int kRowStride = kLd;
  /// Each warp runs its products on its own.
  FA_CONST int kProductWarps = 1;
  typedef typename Target::template FragB<T> FragB;

  /// S += Q B^T: a key per row of the block, so B^T is read with swapped
  /// strides.
  template <
      typename FragC,
      typename FragA,
      int M,
      int N,
      int kWarpRows,
      int kQSrcCols>
  static FA_FUNC void mma_abt(
      FA_THREAD Tile<FragC, M, N>& s,
      const FA_THREAD QInRegisters<FragA, kWarpRows, kCols, kQSrcCols>& q,
      const FA_THREADGROUP T* block,
      lane_t lane) {
    tile_matmad_shared<FragB, 1, kLd>(s, q.tile, block, lane);
  }

  /// As above, Q read from threadgroup memory a k step at a time.
  template <
      typename FragC,
      int M,
      int N,
      typename QTarget,
      int kQRows,
      int kQSrcCols,
      int kWarpRows,
      int kQThreads>
  static FA_FUNC void mma_abt(
      FA_THREAD Tile<FragC, M, N>& s,
      const FA_THREAD QInPaddedShared<
          QTarget,
          T,
          kQRows,
          kCols,
          kQSrcCols,
          kWarpRows,
          kQThreads>& q,
      const FA_THREADGROUP T* block,
      lane_t lane) {
    typedef QInPaddedShared<
        QTarget, T, kQRows, kCols, kQSrcCols, kWarpRows, kQThreads>
        Q;
    typedef typename Target::template FragA<T> FragA;
    FA_UNROLL
    for (int k = 0; k < kCols / FragA::kCols; ++k) {
      Tile<FragA, M, 1> q_step;
      tile_load_shared<Q::kLd, 1>(q_step, q.smem + k * FragA::kCols, lane);
      tile_matmad_shared<FragB, 1, kLd>(
          s, q_step, block + k * FragA::kCols, lane);
    }
  }

  /// O += P B.
  template <typename FragC, typename FragA, int M, int N, int K>
  static FA_FUNC void mma_ab(
      FA_THREAD Tile<FragC, M, N>& o,
      const FA_THREAD Tile<FragA, M, K>& p,
      const FA_THREADGROUP T* block,
      lane_t lane) {
    tile_matmad_shared<FragB, kLd, 1>(o, p, block, lane);
  }

  /// s += a B^T and t += b C^T, B and C blocks of this type.
  template <typename S, typename A, typename B>
  static FA_FUNC void mma_abt_pair(
      FA_THREAD S& s,
      const FA_THREAD A& a,
      const FA_THREADGROUP T* block_b,
      FA_THREAD S& t,
      const FA_THREAD B& b,
      const FA_THREADGROUP T* block_c,
      lane_t lane) {
    mma_abt(s, a, block_b, lane);
    mma_abt(t, b, block_c, lane);
  }

  /// o += p B and u += q C.
  template <typename O, typename P>
  static FA_FUNC void mma_ab_pair(
      FA_THREAD O& o,
      const FA_THREAD P& p,
      const FA_THREADGROUP T* block_b,
      FA_THREAD O& u,
      const FA_THREAD P& q,
      const FA_THREADGROUP T* block_c,
      lane_t lane) {
    mma_ab(o, p, block_b, lane);
    mma_ab(u, q, block_c, lane);
  }
};

} // namespace fa
