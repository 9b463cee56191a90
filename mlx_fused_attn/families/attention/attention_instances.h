// The general kernel's instances (and the split combine's): every key the
// hosts can form, for tools/gen_instances.py (instance_emitter.h).
#pragma once

#include "mlx_fused_attn/families/attention/cuda/attention_kernel_key.h"
#include "mlx_fused_attn/families/instance_emitter.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn::instances {

inline void attention_head_dims(fa::DType t, int d, int dv) {
  using cuda::AttentionKernelKey;
  const std::string group =
      "attention_d" + std::to_string(d) + "_dv" + std::to_string(dv);
  // Plain, causal and array-mask variants; the producer kernel's static
  // and persistent grids (plan/persistent_grid.h), the other kernel's with
  // and without the merge of split keys (split_merge).
  const auto tiles_instances = [&](fa::AttnTiles tiles) {
    for (bool other_form : {false, true}) {
      tiles.persistent = other_form && tiles.producer;
      tiles.split_merge = other_form && !tiles.producer;
      for (int variant = 0; variant < 3; ++variant) {
        cuda(group, AttentionKernelKey{t, d, dv, tiles, variant == 1,
                                       variant == 2}.expression());
      }
    }
  };
  // With and without warpgroup products; for grids of one wave and past
  // it; then Hopper's small-grid producer tiles where the head dims have
  // them (opt-in, plan/small_grid.h).
  for (bool wgmma : {false, true}) {
    for (bool large_grid : {false, true}) {
      tiles_instances(fa::choose_attention_tiles(
          d, dv, t, fa::Backend::Cuda, wgmma, large_grid));
    }
  }
  if (fa::has_small_grid_tiles(d, dv, t, fa::Backend::Cuda, true)) {
    tiles_instances(fa::choose_small_grid_tiles(d));
  }
  // The default tiles first, then those of the variants to time
  // (MetalAttnVariant), each once.
  for (bool q_threadgroup : {false, true}) {
    for (int bk : {0, 16, 32}) {
      const fa::AttnTiles m = fa::choose_attention_tiles(
          d, dv, t, fa::Backend::Metal, false, false, {q_threadgroup, bk});
      metal("attention", m.q_shared ? "FA_INSTANTIATE_QS" : "FA_INSTANTIATE",
            t, {d, dv, m.bq, m.bk, m.warps});
    }
  }
}

inline void enumerate_attention() {
  for (fa::DType t : kDTypes) {
#define FA_ATTENTION(d, dv) attention_head_dims(t, d, dv);
    FA_ATTENTION_HEAD_DIMS(FA_ATTENTION)
#undef FA_ATTENTION
  }
  for (fa::DType t : kDTypes) {
    for (fa::SplitCombineForm form : kSplitCombineForms) {
      cuda("attention_split_combine",
           cuda::SplitCombineKernelKey{t, form}.expression());
    }
  }
}

} // namespace mlx_fused_attn::instances
