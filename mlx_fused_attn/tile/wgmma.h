// Hopper's warpgroup matrix products (wgmma, sm_90a): the instructions, the
// shared-memory matrix descriptor, and the fences around them. Only the
// CUDA target of sm_90a includes this (FA_HAS_WGMMA); swizzled_block.h puts
// them behind the tile ops.
//
// A wgmma is issued by the 4 warps of a warpgroup together: D (m64 x N,
// fp32) += A (m64 x k16) B (k16 x N). Warp w of the group holds rows
// 16 w .. 16 w + 15 of A and D in exactly the per-warp layouts of
// mma.sync's m16n8k16 A operand and N / 8 m16n8 accumulators side by side,
// which are MmaFragA's and MmaFragC's (mma_frag.h): a warp's tile of those
// fragments is, register for register, its share of a wgmma operand. A
// comes from registers or, like B always, from shared memory, read by the
// tensor cores through a descriptor of its layout (smem_layout.h's
// SwizzledRows).
//
// The products run asynchronously: commit() closes the ones issued so far
// into a group and wait<N>() returns when at most N groups are pending. The
// registers of D and A belong to the tensor cores meanwhile, so the
// compiler must not move their reads or writes across fence() and wait():
// fence_operands() ties them there.
#pragma once

#include "mlx_fused_attn/tile/language.h"
#include "mlx_fused_attn/tile/mma_frag.h"

namespace fa {

/// The descriptor of an operand in shared memory (PTX ISA, "Matrix
/// Descriptor Format"): the start address, the byte offsets between core
/// matrices along the leading and the strided dimension, and the swizzle
/// (1: 128 B, 2: 64 B, 3: 32 B), all addresses in 16-byte units.
typedef unsigned long long wgmma_desc_t;

FA_FUNC wgmma_desc_t wgmma_descriptor(
    const void* start,
    int lead_bytes,
    int stride_bytes,
    int swizzle_bytes) {
  const wgmma_desc_t layout =
      swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : 3;
  return wgmma_desc_t((smem_address(start) & 0x3ffff) >> 4) |
      wgmma_desc_t((lead_bytes >> 4) & 0x3fff) << 16 |
      wgmma_desc_t((stride_bytes >> 4) & 0x3fff) << 32 | layout << 62;
}

/// `desc` with its start `bytes` further on (a multiple of 16): the start
/// is the descriptor's low bits, in 16-byte units, and no address of shared
/// memory (under 256 KB) carries out of them. So one descriptor a block,
/// and an add a product, in place of the whole encoding a product.
FA_FUNC wgmma_desc_t wgmma_descriptor_plus(wgmma_desc_t desc, int bytes) {
  return desc + wgmma_desc_t(bytes >> 4);
}

/// Orders this thread's earlier register writes before the products that
/// follow (A operands, accumulators being rescaled).
FA_FUNC void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

FA_FUNC void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/// kSite tells apart the waits in the two arms of a branch: the compiler
/// would merge identical ones above the branch, and there ptxas (CUDA 13.0)
/// schedules a wait early, ahead of independent work in its basic block.
template <int kPending, int kSite = 0>
FA_FUNC void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0; // %1\n" ::"n"(kPending),
               "n"(kSite)
               : "memory");
}

/// Pins n registers in place across the fences: an empty asm that reads
/// and writes each one.
template <int n>
FA_FUNC void wgmma_fence_operands(float* r) {
  FA_UNROLL
  for (int i = 0; i < n; ++i) {
    asm volatile("" : "+f"(r[i])::"memory");
  }
}

/// Shared memory written by the generic proxy (cp.async, st.shared) becomes
/// visible to the tensor cores' async proxy only through this fence, which
/// each writing thread issues before the barrier that publishes the block.
FA_FUNC void fence_shared_for_async_proxy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// One wgmma m64nNk16 with fp32 accumulation, per 16-bit input type and N,
// with A from registers (four 32-bit registers: the warp's MmaFragA) or from
// shared memory (a descriptor, K-major like B's for Q K^T). kTransB = 0: B is
// K-major (each of its columns, a row of the stored block, contiguous: K for
// Q K^T); 1: MN-major (each row contiguous: V for P V). Accumulator operands
// come first, %0 .. %(N / 2 - 1); A and B follow.
#define FA_WGMMA_ACC8(i)                                                  \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]),            \
      "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define FA_WGMMA_ACC16 "{%0,%1,%2,%3,%4,%5,%6,%7}"
#define FA_WGMMA_ACC32 \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define FA_WGMMA_ACC64                                                    \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,"  \
  "%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define FA_WGMMA_ACC128                                                   \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,"  \
  "%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,"  \
  "%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,"  \
  "%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define FA_WGMMA_ACC_OPERANDS16 FA_WGMMA_ACC8(0)
#define FA_WGMMA_ACC_OPERANDS32 FA_WGMMA_ACC8(0), FA_WGMMA_ACC8(8)
#define FA_WGMMA_ACC_OPERANDS64 \
  FA_WGMMA_ACC8(0), FA_WGMMA_ACC8(8), FA_WGMMA_ACC8(16), FA_WGMMA_ACC8(24)
#define FA_WGMMA_ACC_OPERANDS128                                          \
  FA_WGMMA_ACC8(0), FA_WGMMA_ACC8(8), FA_WGMMA_ACC8(16), FA_WGMMA_ACC8(24), \
      FA_WGMMA_ACC8(32), FA_WGMMA_ACC8(40), FA_WGMMA_ACC8(48),            \
      FA_WGMMA_ACC8(56)
// The operand numbers after N / 2 accumulators: RS takes A's four
// registers, B's descriptor and kTransB; SS A's descriptor, B's and kTransB.
#define FA_WGMMA_RS16 " {%8,%9,%10,%11}, %12, 1, 1, 1, %13;\n"
#define FA_WGMMA_RS32 " {%16,%17,%18,%19}, %20, 1, 1, 1, %21;\n"
#define FA_WGMMA_RS64 " {%32,%33,%34,%35}, %36, 1, 1, 1, %37;\n"
#define FA_WGMMA_RS128 " {%64,%65,%66,%67}, %68, 1, 1, 1, %69;\n"
#define FA_WGMMA_SS16 " %8, %9, 1, 1, 1, 0, %10;\n"
#define FA_WGMMA_SS32 " %16, %17, 1, 1, 1, 0, %18;\n"
#define FA_WGMMA_SS64 " %32, %33, 1, 1, 1, 0, %34;\n"
#define FA_WGMMA_SS128 " %64, %65, 1, 1, 1, 0, %66;\n"

template <typename T, int N, int kTransB>
struct Wgmma;

#define FA_DEFINE_WGMMA_N(CType, ptx_type, N)                              \
  template <int kTransB>                                                   \
  struct Wgmma<CType, N, kTransB> {                                        \
    static FA_FUNC void                                                    \
    mma(float* d, const unsigned* a, wgmma_desc_t desc_b) {                \
      asm volatile(                                                        \
          "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." ptx_type       \
          "." ptx_type " " FA_WGMMA_ACC##N "," FA_WGMMA_RS##N              \
          : FA_WGMMA_ACC_OPERANDS##N                                       \
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),      \
            "n"(kTransB));                                                 \
    }                                                                      \
    static FA_FUNC void                                                    \
    mma(float* d, wgmma_desc_t desc_a, wgmma_desc_t desc_b) {              \
      asm volatile(                                                        \
          "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." ptx_type       \
          "." ptx_type " " FA_WGMMA_ACC##N "," FA_WGMMA_SS##N              \
          : FA_WGMMA_ACC_OPERANDS##N                                       \
          : "l"(desc_a), "l"(desc_b), "n"(kTransB));                       \
    }                                                                      \
  };
#define FA_DEFINE_WGMMA(CType, ptx_type)   \
  FA_DEFINE_WGMMA_N(CType, ptx_type, 16)   \
  FA_DEFINE_WGMMA_N(CType, ptx_type, 32)   \
  FA_DEFINE_WGMMA_N(CType, ptx_type, 64)   \
  FA_DEFINE_WGMMA_N(CType, ptx_type, 128)

FA_DEFINE_WGMMA(half_t, "f16")
FA_DEFINE_WGMMA(bfloat_t, "bf16")

#undef FA_DEFINE_WGMMA
#undef FA_DEFINE_WGMMA_N
#undef FA_WGMMA_SS128
#undef FA_WGMMA_SS64
#undef FA_WGMMA_SS32
#undef FA_WGMMA_SS16
#undef FA_WGMMA_RS128
#undef FA_WGMMA_RS64
#undef FA_WGMMA_RS32
#undef FA_WGMMA_RS16
#undef FA_WGMMA_ACC_OPERANDS128
#undef FA_WGMMA_ACC_OPERANDS64
#undef FA_WGMMA_ACC_OPERANDS32
#undef FA_WGMMA_ACC_OPERANDS16
#undef FA_WGMMA_ACC128
#undef FA_WGMMA_ACC64
#undef FA_WGMMA_ACC32
#undef FA_WGMMA_ACC16
#undef FA_WGMMA_ACC8

} // namespace fa
