// The syntax seam: the only file that asks which GPU language it is compiled
// as. Everything above it (tiles, ops, kernel bodies) is written once against
// these macros and types, and so compiles as Metal (C++14 subset), as CUDA
// C++17, and as host C++ inside the Metal emulator (which defines
// __METAL_VERSION__ and provides a Metal shim).
#pragma once

#if defined(__METAL_VERSION__)

#include <metal_simdgroup>
#include <metal_simdgroup_matrix>
#include <metal_stdlib>

#define FA_DEVICE device
#define FA_THREADGROUP threadgroup
#define FA_THREAD thread
#define FA_CONSTANT constant
// Metal rejects threadgroup variables at program scope, so kernels declare
// their threadgroup arrays in the entry point with this. The emulator
// predefines it to make one array shared by all fibers of a threadgroup.
#ifndef FA_SHARED_ARRAY_DECL
#define FA_SHARED_ARRAY_DECL threadgroup
#endif
#define FA_FUNC inline __attribute__((always_inline))
// Static data members of a Metal struct must live in the constant space.
#define FA_CONST static constant constexpr const
#define FA_UNROLL _Pragma("clang loop unroll(full)")
#define FA_BARRIER() \
  metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup)
#define FA_SHUFFLE_XOR(x, mask) metal::simd_shuffle_xor((x), ushort(mask))
#define FA_SIMD_ANY(pred) metal::simd_any(pred)
#define FA_EXP2(x) metal::fast::exp2(x)
#define FA_LOG2(x) metal::log2(x)
#define FA_MAX(a, b) metal::max((a), (b))
#define FA_INFINITY INFINITY
#define FA_FLT_MAX FLT_MAX
#define FA_AS_FLOAT(bits) metal::as_type<float>(bits)

namespace fa {
// Metal's scalar types are builtins on the GPU; the emulator's shim declares
// them in namespace metal.
using namespace metal;
typedef half half_t;
typedef bfloat bfloat_t;
typedef uint lane_t;

/// Elements p[0] and p[1] as floats: two loads, which the GPU's caches
/// serve as one line.
template <typename T>
FA_FUNC void load_pair_as_float(
    const device T* p,
    thread float& x,
    thread float& y) {
  x = static_cast<float>(p[0]);
  y = static_cast<float>(p[1]);
}

/// kN elements of a thread's array into threadgroup memory at dst.
template <typename T, int kN>
FA_FUNC void store_contiguous(threadgroup T* dst, const thread T* src) {
  for (int i = 0; i < kN; ++i) {
    dst[i] = src[i];
  }
}

/// Metal's loads are all plain: nothing is in flight.
FA_FUNC void async_copies_wait_all() {}
} // namespace fa

#elif defined(__CUDACC__)

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define FA_DEVICE
#define FA_THREADGROUP
#define FA_THREAD
#define FA_CONSTANT
#ifndef FA_SHARED_ARRAY_DECL
#define FA_SHARED_ARRAY_DECL __shared__
#endif
#define FA_FUNC __device__ __forceinline__
#define FA_CONST static constexpr
#define FA_UNROLL _Pragma("unroll")
#define FA_BARRIER() __syncthreads()
#define FA_SHUFFLE_XOR(x, mask) __shfl_xor_sync(0xffffffffu, (x), (mask))
#define FA_SIMD_ANY(pred) __any_sync(0xffffffffu, (pred))
#define FA_EXP2(x) ::fa::exp2_approx(x)
#define FA_LOG2(x) log2f(x)
#define FA_MAX(a, b) fmaxf((a), (b))
#define FA_INFINITY __int_as_float(0x7f800000)
#define FA_FLT_MAX 3.402823466e+38f
#define FA_AS_FLOAT(bits) __uint_as_float(bits)

namespace fa {
typedef __half half_t;
typedef __nv_bfloat16 bfloat_t;
typedef unsigned int lane_t;

/// Elements p[0] and p[1] as floats, p aligned to the pair: one load of 4
/// (or 8) bytes, half the L1 wavefronts of two scattered 2-byte loads.
__device__ __forceinline__ void
load_pair_as_float(const __half* p, float& x, float& y) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(p));
  x = f.x;
  y = f.y;
}
__device__ __forceinline__ void
load_pair_as_float(const __nv_bfloat16* p, float& x, float& y) {
  const float2 f =
      __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
  x = f.x;
  y = f.y;
}
__device__ __forceinline__ void
load_pair_as_float(const float* p, float& x, float& y) {
  const float2 f = *reinterpret_cast<const float2*>(p);
  x = f.x;
  y = f.y;
}

/// Every cp.async copy this thread issued has landed, those of no group
/// too (cp.async.wait_all commits them first): where a loader's own loads
/// are plain, the copies of another that joined its group (Q's,
/// q_in_padded_shared.h) are waited for here.
__device__ __forceinline__ void async_copies_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/// kN elements of a thread's array into shared memory at dst, 16 bytes a
/// store (dst 16-byte aligned): a sixteenth of the store instructions of
/// 2-byte elements one at a time, and a quarter of their shared-memory
/// wavefronts.
template <typename T, int kN>
__device__ __forceinline__ void store_contiguous(T* dst, const T* src) {
  static_assert(
      (kN * sizeof(T)) % sizeof(uint4) == 0, "whole 16-byte stores");
#pragma unroll
  for (int i = 0; i < int(kN * sizeof(T) / sizeof(uint4)); ++i) {
    uint4 u;
    memcpy(&u, src + i * int(sizeof(uint4) / sizeof(T)), sizeof(uint4));
    reinterpret_cast<uint4*>(dst)[i] = u;
  }
}

/// The hardware exp2 (MUFU.EX2, ~2 ulp), as Metal's fast::exp2: exp2f
/// without --use_fast_math is a longer exact sequence. exp2(-inf) = 0.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
} // namespace fa

#else
#error \
    "mlx_fused_attn/tile: compile as Metal, as CUDA, or inside the Metal emulator"
#endif

// Scores are kept in the exp2 domain: exp(x) = exp2(x * log2(e)).
#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f
