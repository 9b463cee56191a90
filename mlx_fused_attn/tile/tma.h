// Hopper's tensor memory accelerator (TMA) and the mbarriers its copies
// complete on (sm_90): the instructions of warp-specialised kernels, in
// which one thread copies whole blocks from a tensor map into shared memory
// and the others wait on a barrier instead of copying. CUDA only; the
// schedule over them is kv_tma_ring.h.
//
// A copy's bytes land in the async proxy, where the warpgroup products read
// them: a completed mbarrier phase makes them visible with no fence.
#pragma once

// CUDA only: TMA has no Metal counterpart, and its 64-bit operands are
// `long long`, which Metal lacks (its `long` is 64 bits).
#if defined(__METAL_VERSION__)
#error "mlx_fused_attn/tile/tma.h is CUDA only"
#endif

#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/mma_frag.h"
#include "mlx_fused_attn/tile/tma_map.h"

namespace fa {

/// A 64-bit mbarrier in shared memory.
typedef unsigned long long mbarrier_t;

FA_FUNC void mbarrier_init(mbarrier_t* bar, unsigned arrivals) {
  asm volatile(
      "mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_address(bar)),
      "r"(arrivals)
      : "memory");
}

/// Makes this thread's mbarrier_inits visible to the async proxy (the
/// copies' completions); a barrier of the threadgroup follows it.
FA_FUNC void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

FA_FUNC void mbarrier_arrive(mbarrier_t* bar) {
  asm volatile(
      "mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_address(bar))
      : "memory");
}

/// The copier's arrival, with the bytes that its copies on `bar` will bring:
/// the phase completes when they have all landed.
FA_FUNC void mbarrier_arrive_expect_bytes(mbarrier_t* bar, unsigned bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
          smem_address(bar)),
      "r"(bytes)
      : "memory");
}

/// Returns once the phase of parity `parity` has completed.
FA_FUNC void mbarrier_wait(mbarrier_t* bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

/// One box of the 4-D tensor `map` at (column, row, head, batch) into dst,
/// completing on `bar`. Rows past the tensor's end land as zeros.
FA_FUNC void tma_copy_4d(
    void* dst,
    const TmaMap& map,
    mbarrier_t* bar,
    int col,
    int row,
    int head,
    int batch) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile"
      ".mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::
          "r"(smem_address(dst)),
      "l"(reinterpret_cast<unsigned long long>(&map)),
      "r"(smem_address(bar)),
      "r"(col),
      "r"(row),
      "r"(head),
      "r"(batch)
      : "memory");
}

/// Named barrier `id` (1 .. 15; 0 is __syncthreads') of `threads` threads,
/// whole warps: a barrier of part of the threadgroup.
FA_FUNC void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/// This warp's arrival at named barrier `id` without waiting for it.
FA_FUNC void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/// This warpgroup's registers a thread become kRegs (sm_90a): a producer
/// gives its registers up and the math warpgroups take them.
template <int kRegs>
FA_FUNC void warpgroup_registers_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
FA_FUNC void warpgroup_registers_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

} // namespace fa
