// The quantized-KV attention family's instances (and its split combine's):
// every key the hosts can form, for tools/gen_instances.py
// (instance_emitter.h).
#pragma once

#include "mlx_fused_attn/families/quantized_attention/cuda/quantized_attention_kernel_key.h"
#include "mlx_fused_attn/families/instance_emitter.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_config.h"
#include "mlx_fused_attn/plan/quantized_kernel_choice.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn::instances {

inline void quantized_attention_shape(fa::DType t, int d, int bits) {
  // Each kernel the planner can pick (its tiles and chunk policy), plain,
  // causal and array-mask.
  mlx_fused_attn::for_each_quantized_cuda_kernel(
      d, bits, t, [&](fa::AttnTiles tiles, fa::QuantizedChunks chunks) {
        for (int variant = 0; variant < 3; ++variant) {
          cuda("quantized_attention_d" + std::to_string(d),
               cuda::QuantizedAttentionKernelKey{
                   t, d, bits, tiles, variant == 1, variant == 2, chunks}
                   .expression());
        }
      });
  const fa::AttnTiles m =
      fa::choose_quantized_attention_tiles(d, t, fa::Backend::Metal);
  metal("quantized_attention", "FA_QUANTIZED_INSTANTIATE", t,
        {d, bits, m.bq, m.bk, m.warps});
}

inline void enumerate_quantized_attention() {
  for (fa::DType t : kDTypes) {
#define FA_QUANTIZED_BITS(bits) quantized_attention_shape(t, d, bits);
#define FA_QUANTIZED(dd)                         \
  {                                              \
    const int d = dd;                            \
    FA_QUANTIZED_ATTENTION_BITS(FA_QUANTIZED_BITS) \
  }
    FA_QUANTIZED_ATTENTION_HEAD_DIMS(FA_QUANTIZED)
#undef FA_QUANTIZED
#undef FA_QUANTIZED_BITS
  }
  for (fa::DType t : kDTypes) {
    for (fa::SplitCombineForm form : kSplitCombineForms) {
      cuda("quantized_attention_split_combine",
           cuda::QuantizedSplitCombineKernelKey{t, form}.expression());
    }
  }
}

} // namespace mlx_fused_attn::instances
