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
// mma_ab (and the pairs), so they return with their accumulators ready, as
// the per-warp products do; the other threadgroups on the multiprocessor
// fill the wait. Every accumulator is pinned before the wgmma.fence, so
// that no write to it (a zero fill) lands between the fence and the
// products, which the PTX ISA leaves undefined
// (tests/test_wgmma_fences_compile.py checks the PTX).
// Left in flight across the softmax (FlashAttention-3's overlap) they pay
// only with a third K/V stage and registers to spare: the producer tiles
// (kv_tma_ring.h, attention_step.h's overlapped step) issue and retire
// them apart; the others measured slower so (docs/gpu_kernels.md). Two
// things ptxas (CUDA 13.0) reports then: with too few registers for two score tiles it serialises
// every wgmma of the kernel (C7512), and so it does when a product is
// started under a branch that ptxas cannot resolve (C7514), so a pipelined
// loop must peel its first and last iterations.
#pragma once

#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/cp_async_loader.h"
#include "mlx_fused_attn/tile/mma_frag.h"
#include "mlx_fused_attn/tile/q_in_registers.h"
#include "mlx_fused_attn/tile/q_in_shared.h"
#include "mlx_fused_attn/tile/smem_layout.h"
#include "mlx_fused_attn/tile/tile.h"
#include "mlx_fused_attn/tile/wgmma.h"

namespace fa {

/// The copy is cp.async into the swizzled layout: load, load_safe, load_row
/// and commit come from the loader; wait adds the fence the tensor cores need. Of the
/// kCols columns the first kSrcCols are copied, the rest zero-filled.
template <typename T, int kRows, int kCols, int kSrcCols, int kThreads>
struct SwizzledBlock : CpAsyncLoader<
                           T,
                           kRows,
                           kCols,
                           SwizzledRows<T, kRows, kCols>,
                           kThreads,
                           kSrcCols> {
  typedef SwizzledRows<T, kRows, kCols> Layout;
  typedef CpAsyncLoader<T, kRows, kCols, Layout, kThreads, kSrcCols> Loader;
  FA_CONST int kElems = kRows * kCols;
  /// A warpgroup's warps issue each product together.
  FA_CONST int kProductWarps = 4;
  /// A P V product covers one 128-byte panel of the head dim (64 columns),
  /// or two wide panels, the second a panel's stride on (the descriptor's
  /// leading byte offset, along N of an MN-major operand).
  FA_CONST int kMaxN = Layout::kWideCols;
  /// A Q K^T product covers up to 128 keys (8-row groups of one panel, 8
  /// rows apart): one instruction where 64-key products took two, 64
  /// accumulator registers a thread either way.
  FA_CONST int kMaxKeys = 128;
  static_assert(kThreads % 128 == 0, "warps must form whole warpgroups");
  static_assert(sizeof(T) == 2, "wgmma takes 16-bit inputs here");

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
  /// groups are 8 rows of the panel apart, and every kMaxKeys keys are one
  /// product. Q is the warp's A fragments in registers, or Q's swizzled
  /// panels in shared memory, addressed as B's. Each product's descriptor
  /// is the block's plus its offset (wgmma_descriptor_plus).
  template <int N, typename Q>
  static FA_FUNC void
  mma_abt(Tile<MmaFragC, 1, N>& s, const Q& q, const T* block, lane_t) {
    static_assert(N * MmaFragC::kCols == kRows, "S covers the block's keys");
    float* d = s.frags[0].v;
    begin<kRows / 2>(d);
    issue_abt(d, q, block);
    end<kRows / 2>(d);
    keep_until_done(q);
  }

  /// O += P B, B the block (keys x head dim): MN-major, the head dim
  /// contiguous. Step kk covers keys 16 kk.., two 8-row groups 8 rows of a
  /// panel apart; each pair of wide panels of the head dim is one product,
  /// and a panel left over another.
  template <int N, int K>
  static FA_FUNC void mma_ab(
      Tile<MmaFragC, 1, N>& o,
      const Tile<MmaFragA<T>, 1, K>& p,
      const T* block,
      lane_t) {
    static_assert(N * MmaFragC::kCols == kCols, "O covers the head dim");
    float* d = o.frags[0].v;
    begin<kCols / 2>(d);
    issue_ab(d, p, block);
    end<kCols / 2>(d);
    keep_until_done(p);
  }

  /// Two S-type products issued back to back behind one wait: the tensor
  /// cores start the second while the first drains.
  template <int N, typename A, typename B>
  static FA_FUNC void mma_abt_pair(
      Tile<MmaFragC, 1, N>& s,
      const A& a,
      const T* block_b,
      Tile<MmaFragC, 1, N>& t,
      const B& b,
      const T* block_c,
      lane_t) {
    static_assert(N * MmaFragC::kCols == kRows, "S covers the block's keys");
    begin<kRows / 2>(s.frags[0].v, t.frags[0].v);
    issue_abt(s.frags[0].v, a, block_b);
    issue_abt(t.frags[0].v, b, block_c);
    end<kRows / 2>(s.frags[0].v, t.frags[0].v);
    keep_until_done(a);
    keep_until_done(b);
  }

  /// Two O-type products behind one wait.
  template <int N, int K>
  static FA_FUNC void mma_ab_pair(
      Tile<MmaFragC, 1, N>& o,
      const Tile<MmaFragA<T>, 1, K>& p,
      const T* block_b,
      Tile<MmaFragC, 1, N>& u,
      const Tile<MmaFragA<T>, 1, K>& q,
      const T* block_c,
      lane_t) {
    static_assert(N * MmaFragC::kCols == kCols, "O covers the head dim");
    begin<kCols / 2>(o.frags[0].v, u.frags[0].v);
    issue_ab(o.frags[0].v, p, block_b);
    issue_ab(u.frags[0].v, q, block_c);
    end<kCols / 2>(o.frags[0].v, u.frags[0].v);
    keep_until_done(p);
    keep_until_done(q);
  }

  /// mma_abt and mma_ab issued as one committed group each and not waited
  /// for, so that a loop can overlap them with its softmax (the producer
  /// tiles' overlapped step, attention_step.h); `retire` waits
  /// until at most kPending groups are in flight and pins the accumulators
  /// of the products it waited for. A registers must stay untouched until
  /// then (keep_until_done after retire). kSite: wgmma_wait's.
  template <int N, typename Q>
  static FA_FUNC void
  issue_mma_abt(Tile<MmaFragC, 1, N>& s, const Q& q, const T* block) {
    static_assert(N * MmaFragC::kCols == kRows, "S covers the block's keys");
    begin<kRows / 2>(s.frags[0].v);
    issue_abt(s.frags[0].v, q, block);
    wgmma_commit();
  }
  template <int N, int K>
  static FA_FUNC void issue_mma_ab(
      Tile<MmaFragC, 1, N>& o,
      const Tile<MmaFragA<T>, 1, K>& p,
      const T* block) {
    static_assert(N * MmaFragC::kCols == kCols, "O covers the head dim");
    begin<kCols / 2>(o.frags[0].v);
    issue_ab(o.frags[0].v, p, block);
    wgmma_commit();
  }
  template <int kPending, int kSite = 0, int N>
  static FA_FUNC void retire(Tile<MmaFragC, 1, N>& acc) {
    wgmma_wait<kPending, kSite>();
    wgmma_fence_operands<N * MmaFragC::kCols / 2>(acc.frags[0].v);
  }

  /// A operands in registers are read asynchronously too: they stay live
  /// (an empty asm reads them) until the products are done.
  template <int K>
  static FA_FUNC void keep_until_done(const Tile<MmaFragA<T>, 1, K>& a) {
    FA_UNROLL
    for (int f = 0; f < K; ++f) {
      FA_UNROLL
      for (int i = 0; i < MmaFragA<T>::kElems / 2; ++i) {
        asm volatile("" ::"r"(a_registers(a.frags[f])[i]) : "memory");
      }
    }
  }

 private:
  static FA_FUNC const unsigned* a_registers(const MmaFragA<T>& a) {
    return reinterpret_cast<const unsigned*>(a.v);
  }

  template <int kAcc>
  static FA_FUNC void begin(float* d) {
    wgmma_fence_operands<kAcc>(d);
    wgmma_fence();
  }

  template <int kAcc>
  static FA_FUNC void end(float* d) {
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands<kAcc>(d);
  }

  /// As above for a pair's two accumulators, both pinned before the fence
  /// that orders their writes.
  template <int kAcc>
  static FA_FUNC void begin(float* d, float* e) {
    wgmma_fence_operands<kAcc>(e);
    begin<kAcc>(d);
  }

  template <int kAcc>
  static FA_FUNC void end(float* d, float* e) {
    end<kAcc>(d);
    wgmma_fence_operands<kAcc>(e);
  }

  /// Q K^T's products, every k16 step of the head dim, Q in registers.
  template <int kQSrcCols>
  static FA_FUNC void issue_abt(
      float* d,
      const QInRegisters<MmaFragA<T>, 16, kCols, kQSrcCols>& q,
      const T* block) {
    FA_UNROLL
    for (int kk = 0; kk < kCols / 16; ++kk) {
      issue_keys<0>(d, a_registers(q.tile.frags[kk]), block, kk * 16);
    }
  }

  /// As above, Q's swizzled panels in shared memory, addressed as B's.
  template <int kQRows, int kQThreads, int kQSrcCols>
  static FA_FUNC void issue_abt(
      float* d,
      const QInShared<T, kQRows, kCols, kQThreads, kQSrcCols>& q,
      const T* block) {
    typedef typename QInShared<T, kQRows, kCols, kQThreads, kQSrcCols>::Layout
        QLayout;
    FA_UNROLL
    for (int kk = 0; kk < kCols / 16; ++kk) {
      const int col = kk * 16;
      const int width = QLayout::panel_bytes(col);
      const wgmma_desc_t a = wgmma_descriptor_plus(
          wgmma_descriptor(q.smem, 16, 8 * width, width),
          (QLayout::panel_start(col) + col % QLayout::kWideCols) *
              int(sizeof(T)));
      issue_keys<0>(d, a, block, col);
    }
  }

  /// P B's products, every k16 step of the block's keys.
  template <int K>
  static FA_FUNC void
  issue_ab(float* d, const Tile<MmaFragA<T>, 1, K>& p, const T* block) {
    static_assert(K * MmaFragA<T>::kCols == kRows, "P covers the block's keys");
    FA_UNROLL
    for (int kk = 0; kk < K; ++kk) {
      issue_panels<0>(d, a_registers(p.frags[kk]), block, kk * 16);
    }
  }

  template <int kQSrcCols>
  static FA_FUNC void keep_until_done(
      const QInRegisters<MmaFragA<T>, 16, kCols, kQSrcCols>& q) {
    keep_until_done(q.tile);
  }
  /// A in shared memory: nothing in registers to keep.
  template <int kQRows, int kQThreads, int kQSrcCols>
  static FA_FUNC void keep_until_done(
      const QInShared<T, kQRows, kCols, kQThreads, kQSrcCols>&) {}

  /// Q K^T's products of the k16 step at head-dim column `col` for keys kN0
  /// onwards, kMaxKeys at a time; `a` is Q's step (registers or a
  /// descriptor).
  template <int kN0, typename A>
  static FA_FUNC void issue_keys(float* d, A a, const T* block, int col) {
    if constexpr (kN0 < kRows) {
      constexpr int n = kRows - kN0 < kMaxKeys ? kRows - kN0 : kMaxKeys;
      const int width = Layout::panel_bytes(col);
      const int start = Layout::panel_start(col) + col % Layout::kWideCols +
          kN0 * (width / int(sizeof(T)));
      Wgmma<T, n, 0>::mma(
          d + kN0 / 2,
          a,
          wgmma_descriptor_plus(
              wgmma_descriptor(block, 16, 8 * width, width),
              start * int(sizeof(T))));
      issue_keys<kN0 + kMaxKeys>(d, a, block, col);
    }
  }

  /// P V's products of the k16 step at key `key0`, of the head dim from
  /// column kN0 on: two wide panels at once, or one (a wide panel's kMaxN
  /// columns, or the tail).
  template <int kN0, typename A>
  static FA_FUNC void
  issue_panels(float* d, A a, const T* block, int key0) {
    if constexpr (kN0 < kCols) {
      // Two wide panels make one product, the second a panel's stride on.
      constexpr bool kPair =
          kN0 + 2 * kMaxN <= Layout::kWidePanels * Layout::kWideCols;
      constexpr int n = kPair ? 2 * kMaxN
          : kCols - kN0 < kMaxN ? kCols - kN0
                                : kMaxN;
      static_assert(
          kPair || n == Layout::kWideCols || n == Layout::kTailCols,
          "a product covers one panel, or two wide ones");
      const int width = Layout::panel_bytes(kN0);
      const int start =
          Layout::panel_start(kN0) + key0 * (width / int(sizeof(T)));
      const int lead = kPair
          ? Layout::panel_start(Layout::kWideCols) * int(sizeof(T))
          : 16;
      Wgmma<T, n, 1>::mma(
          d + kN0 / 2,
          a,
          wgmma_descriptor_plus(
              wgmma_descriptor(block, lead, 8 * width, width),
              start * int(sizeof(T))));
      issue_panels<kN0 + n>(d, a, block, key0);
    }
  }
};

} // namespace fa
