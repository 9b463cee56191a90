// Names for what a kernel is compiled for: the element type of its inputs and
// the GPU it runs on. Plain enums so that host C++, Metal and CUDA code (and
// constexpr choosers shared by all three) can use them without language.h.
#pragma once

namespace fa {

enum class DType { Float16, BFloat16, Float32 };

enum class Backend { Metal, Cuda };

/// Lanes per simdgroup (Metal) or warp (CUDA); both are 32 wide.
enum { kSimdWidth = 32 };

/// Threadgroup memory a Metal threadgroup may have on every Apple GPU; each
/// .metal entry point asserts its threadgroup arrays fit.
enum { kMetalMaxThreadgroupBytes = 32768 };

constexpr int dtype_size(DType dtype) {
  return dtype == DType::Float32 ? 4 : 2;
}

/// Rows and columns of the matrix fragments of `backend`: Metal's 8x8
/// simdgroup matrices, CUDA's 16x16 mma.sync tiles (whose k16 steps wgmma
/// shares); simdgroup_frag.h and mma_frag.h assert that they agree. A head
/// dim runs in whole fragments of them.
constexpr int fragment_size(Backend backend) {
  return backend == Backend::Metal ? 8 : 16;
}

constexpr int round_up(int x, int multiple) {
  return (x + multiple - 1) / multiple * multiple;
}

} // namespace fa
