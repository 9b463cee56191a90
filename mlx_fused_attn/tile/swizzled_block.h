// A block of rows (a K or V block of the attention kernel) in shared memory
// laid out for Hopper's warpgroup products (smem_layout.h's SwizzledRows),
// copied in by cp.async and read by wgmma (wgmma.h) straight from shared
// memory: no ldmatrix, and one instruction covers 64 query rows (the 4 warps
// of a warpgroup) instead of 16. The interface is padded_block.h's, so the
// kernel body does not change; what it requires of the body:
//
// - Every warp owns 16 query rows (one fragment of rows: M = 1), and the
//   threadgroup's warps come in whole warpgroups of 4, all of which call
//   the products together.
// - The block starts 1024-byte aligned (the swizzle pattern is anchored to
//   address bits).
//
// The products are issued, committed and waited for inside mma_abt and
// mma_ab, so they return with their accumulators ready, as the per-warp
// products do; the other threadgroups on the multiprocessor fill the wait.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/backend.h"
#include "mlx_fused_attn/tile/cp_async_loader.h"
#include "mlx_fused_attn/tile/mma_frag.h"
#include "mlx_fused_attn/tile/smem_layout.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/wgmma.h"

namespace fa {

template <typename T, int kRows, int kCols, int kThreads>
struct SwizzledBlock {
  typedef SwizzledRows<T, kRows, kCols> Layout;
  typedef CpAsyncLoader<T, kRows, kCols, Layout, kThreads> Loader;
  FA_CONST int kElems = kRows * kCols;
  /// wgmma's widest N here: 64 columns keep one product's accumulators at
  /// 32 registers a thread, and every head dim splits into 64, 32 and 16.
  FA_CONST int kMaxN = 64;
  static_assert(kThreads % 128 == 0, "warps must form whole warpgroups");
  static_assert(sizeof(T) == 2, "wgmma takes 16-bit inputs here");

  static FA_FUNC void load(T* dst, const T* src, stride_t ld, int tid) {
    Loader::load(dst, src, ld, tid);
  }

  static FA_FUNC void
  load_safe(T* dst, const T* src, stride_t ld, int rows, int tid) {
    Loader::load_safe(dst, src, ld, rows, tid);
  }

  static FA_FUNC void commit() {
    Loader::commit();
  }

  /// As the loader's wait, and then this thread's copies are made visible
  /// to the tensor cores (the barrier after it makes them everyone's).
  template <int kPending>
  static FA_FUNC void wait() {
    Loader::template wait<kPending>();
    fence_shared_for_async_proxy();
  }

  /// S += Q B^T, B the block with a key per row: B is K-major (the head dim
  /// contiguous). Step kk of the head dim starts 2 * 16 kk bytes into the
  /// rows of its panel (the hardware applies the swizzle to the address it
  /// forms, so a start inside a swizzle row is allowed); the keys' 8-row
  /// groups are 8 * kSwizzleBytes apart.
  template <int N, int K>
  static FA_FUNC void mma_abt(
      Tile<MmaFragC, 1, N>& s,
      const Tile<MmaFragA<T>, 1, K>& q,
      const T* block,
      lane_t) {
    static_assert(N * MmaFragC::kCols == kRows, "S covers the block's keys");
    static_assert(K * MmaFragA<T>::kCols == kCols, "Q covers the head dim");
    float* d = s.frags[0].v;
    begin<kRows / 2>(d);
    FA_UNROLL
    for (int kk = 0; kk < K; ++kk) {
      const int col = kk * 16;
      const T* start = block + (col / Layout::kPanelCols) * Layout::kPanelElems +
          col % Layout::kPanelCols;
      issue<0, 0>(d, q.frags[kk], start, 16, 8 * Layout::kSwizzleBytes);
    }
    end<kRows / 2>(d, q);
  }

  /// O += P B, B the block (keys x head dim): MN-major, the head dim
  /// contiguous. Step kk covers keys 16 kk.., two 8-row groups
  /// 8 * kSwizzleBytes apart; N spans panels kPanelElems apart.
  template <int N, int K>
  static FA_FUNC void mma_ab(
      Tile<MmaFragC, 1, N>& o,
      const Tile<MmaFragA<T>, 1, K>& p,
      const T* block,
      lane_t) {
    static_assert(N * MmaFragC::kCols == kCols, "O covers the head dim");
    static_assert(K * MmaFragA<T>::kCols == kRows, "P covers the block's keys");
    float* d = o.frags[0].v;
    begin<kCols / 2>(d);
    FA_UNROLL
    for (int kk = 0; kk < K; ++kk) {
      issue<1, 0>(
          d,
          p.frags[kk],
          block + kk * 16 * Layout::kPanelCols,
          Layout::kPanelElems * int(sizeof(T)),
          8 * Layout::kSwizzleBytes);
    }
    end<kCols / 2>(d, p);
  }

 private:
  template <int kAcc>
  static FA_FUNC void begin(float* d) {
    wgmma_fence_operands<kAcc>(d);
    wgmma_fence();
  }

  /// The A registers are read asynchronously too: they stay live (an empty
  /// asm reads them) until the products are done.
  template <int kAcc, int K>
  static FA_FUNC void end(float* d, const Tile<MmaFragA<T>, 1, K>& a) {
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands<kAcc>(d);
    FA_UNROLL
    for (int f = 0; f < K; ++f) {
      const unsigned* r = reinterpret_cast<const unsigned*>(a.frags[f].v);
      FA_UNROLL
      for (int i = 0; i < MmaFragA<T>::kElems / 2; ++i) {
        asm volatile("" ::"r"(r[i]) : "memory");
      }
    }
  }

  /// The products of one k16 step for output columns kN0 onwards, in
  /// pieces of at most kMaxN: columns n of B start n / kPanelCols panels
  /// on (MN-major, kTransB = 1) or n rows on (K-major, whose rows are the
  /// output columns).
  template <int kTransB, int kN0>
  static FA_FUNC void issue(
      float* d,
      const MmaFragA<T>& a,
      const T* start,
      int lead_bytes,
      int stride_bytes) {
    constexpr int kN = kTransB ? kCols : kRows;
    if constexpr (kN0 < kN) {
      constexpr int n = kN - kN0 < kMaxN ? kN - kN0 : kMaxN;
      const T* piece = kTransB
          ? start + (kN0 / Layout::kPanelCols) * Layout::kPanelElems
          : start + kN0 * Layout::kPanelCols;
      Wgmma<T, n, kTransB>::mma(
          d + kN0 / 2,
          reinterpret_cast<const unsigned*>(a.v),
          wgmma_descriptor(
              piece, lead_bytes, stride_bytes, Layout::kSwizzleBytes));
      issue<kTransB, kN0 + kMaxN>(d, a, start, lead_bytes, stride_bytes);
    }
  }
};

} // namespace fa
