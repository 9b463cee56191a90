// The neighborhood kernel's instances: every key the hosts can form, for
// tools/gen_instances.py (instance_emitter.h).
#pragma once

#include "mlx_fused_attn/families/neighborhood/cuda/na_kernel_key.h"
#include "mlx_fused_attn/families/instance_emitter.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"

namespace mlx_fused_attn::instances {

inline void neighborhood_shape(fa::DType t, int d, int n) {
  cuda("neighborhood_" + std::to_string(n) + "d",
       cuda::NaKernelKey{t, d, n, fa::choose_na_tiles(d, t, fa::Backend::Cuda, n)}
           .expression());
  const auto m = fa::choose_na_tiles(d, t, fa::Backend::Metal, n);
  metal("neighborhood", "FA_NA_INSTANTIATE", t,
        {d, fa::na_tile_queries(m), m.key_block, m.warps, n});
}

inline void enumerate_neighborhood() {
#define FA_NA_DIM(d) neighborhood_shape(t, d, n);
#define FA_NA(nn)                 \
  for (fa::DType t : kDTypes) {   \
    const int n = nn;             \
    FA_NA_HEAD_DIMS(FA_NA_DIM)    \
  }
  FA_NA_AXES(FA_NA)
#undef FA_NA
#undef FA_NA_DIM
}

} // namespace mlx_fused_attn::instances
