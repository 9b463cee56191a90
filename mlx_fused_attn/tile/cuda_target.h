// What a kernel body runs on when compiled as CUDA: mma.sync fragments per
// role (mma_frag.h) and the cp.async block loader. The Metal counterpart is
// metal_target.h.
#pragma once

#include "mlx_fused_attn/tile/cp_async_loader.h"
#include "mlx_fused_attn/tile/mma_frag.h"

namespace fa {

struct CudaTarget {
  template <typename T>
  using FragA = MmaFragA<T>;
  template <typename T>
  using FragB = MmaFragB<T>;
  typedef MmaFragC FragC;
  template <typename T, int kRows, int kCols, int kDstLd, int kThreads>
  using Loader = CpAsyncLoader<T, kRows, kCols, kDstLd, kThreads>;
};

} // namespace fa
