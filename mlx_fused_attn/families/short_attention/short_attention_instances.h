// The short-sequence kernel's instances: every key the hosts can form, for
// tools/gen_instances.py (instance_emitter.h).
#pragma once

#include "mlx_fused_attn/families/short_attention/cuda/short_attention_kernel_key.h"
#include "mlx_fused_attn/families/instance_emitter.h"
#include "mlx_fused_attn/families/short_attention/short_attention_config.h"

namespace mlx_fused_attn::instances {

inline void short_attention_shape(fa::DType t, int d, int seq) {
  cuda("short_attention_d" + std::to_string(d),
       cuda::ShortAttentionKernelKey{
           t, d, fa::choose_short_attention_tiles(d, t, fa::Backend::Cuda, seq)}
           .expression());
  if (fa::short_attention_instantiated(d, t, fa::Backend::Metal, seq)) {
    const fa::ShortAttnTiles m =
        fa::choose_short_attention_tiles(d, t, fa::Backend::Metal, seq);
    metal("short_attention", "FA_SHORT_INSTANTIATE", t,
          {d, seq, m.warp_rows, m.warps, m.problems});
  }
}

inline void enumerate_short_attention() {
  for (fa::DType t : kDTypes) {
#define FA_SHORT_SEQ(seq) short_attention_shape(t, d, seq);
#define FA_SHORT(dd)                       \
  {                                        \
    const int d = dd;                      \
    FA_SHORT_ATTENTION_SEQS(FA_SHORT_SEQ)  \
  }
    FA_SHORT_ATTENTION_HEAD_DIMS(FA_SHORT)
#undef FA_SHORT
#undef FA_SHORT_SEQ
  }
}

} // namespace mlx_fused_attn::instances
