// The backward's instances (dK/dV, dQ and the row dot): every key the hosts
// can form, for tools/gen_instances.py (instance_emitter.h).
#pragma once

#include "mlx_fused_attn/families/attention_backward/cuda/attention_backward_kernel_key.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_config.h"
#include "mlx_fused_attn/families/instance_emitter.h"

namespace mlx_fused_attn::instances {

inline void attention_backward_head_dim(fa::DType t, int d) {
  using cuda::AttentionBackwardKernelKey;
  const std::string group = "attention_backward_d" + std::to_string(d);
  cuda("attention_backward_row_dot",
       cuda::AttentionBackwardRowDotKey{t}.expression());
  cuda("attention_backward_row_dot",
       cuda::AttentionBackwardDqConvertKey{t}.expression());
  // With and without warpgroup products; dK/dV in both forms (a switch
  // forces either anywhere on CUDA).
  for (bool wgmma : {false, true}) {
    const fa::AttnBwdTiles tiles =
        fa::choose_attention_backward_tiles(d, t, fa::Backend::Cuda, wgmma);
    for (fa::BwdKernel k : {fa::BwdKernel::DkDv, fa::BwdKernel::Dq}) {
      for (int variant = 0; variant < 3; ++variant) {
        for (bool atomics : {false, true}) {
          if (atomics && k == fa::BwdKernel::Dq) {
            continue;
          }
          cuda(group, AttentionBackwardKernelKey{k, t, d, tiles.of(k),
                                                 variant == 1, variant == 2,
                                                 atomics}
                          .expression());
        }
      }
    }
  }
  metal("attention_backward_row_dot", "FA_BWD_ROW_DOT_INSTANTIATE", t, {});
  const fa::AttnTiles m =
      fa::choose_attention_backward_tiles(d, t, fa::Backend::Metal).dkdv;
  metal("attention_backward", "FA_BWD_INSTANTIATE", t,
        {d, m.bq, m.bk, m.warps});
}

inline void enumerate_attention_backward() {
  for (fa::DType t : kDTypes) {
#define FA_BACKWARD(d) attention_backward_head_dim(t, d);
    FA_ATTENTION_BACKWARD_HEAD_DIMS(FA_BACKWARD)
#undef FA_BACKWARD
  }
}

} // namespace mlx_fused_attn::instances
