// The CPU kernel's problem for attention over a quantized K/V cache,
// type-erased as problem.h's are (which declares its kernel builds).
#pragma once

#include <cstdint>

#include "mlx_fused_attn/backend/cpu/problem.h"
#include "mlx_fused_attn/quantized_kv_params.h"

namespace mlx_fused_attn::cpu {

struct QuantProblem {
  /// q, the mask, the sinks and the output as the float kernel reads them
  /// (its k and v unused); shapes packed where packed_gqa.
  Problem attn;
  fa::QuantKvParams kv; ///< code width, group size, K's and V's strides
  const uint32_t* k_words;
  const void* k_scales; ///< of attn.dtype, as the biases
  const void* k_biases;
  const uint32_t* v_words;
  const void* v_scales;
  const void* v_biases;
  /// Decode with GQA packed (quantized_attention_plan.h): a block's rows
  /// are the query heads of one key/value head.
  bool packed_gqa;
};

} // namespace mlx_fused_attn::cpu
