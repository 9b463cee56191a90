// What a kernel body runs on when compiled as Metal: simdgroup-matrix
// fragments in every role and the plain-load block loader. A CUDA target
// names its mma.sync fragments per role and its cp.async loader instead.
#pragma once

#include "mlx_fused_attn/tile/block_loader.h"
#include "mlx_fused_attn/tile/simdgroup_frag.h"

namespace fa {

struct MetalTarget {
  template <typename T>
  using FragA = SimdgroupFrag;
  template <typename T>
  using FragB = SimdgroupFrag;
  typedef SimdgroupFrag FragC;
  template <typename T, int kRows, int kCols, int kDstLd, int kThreads>
  using Loader = BlockLoader<T, kRows, kCols, kDstLd, kThreads>;
};

} // namespace fa
