// A validated attention call over a quantized K/V cache: K and V as
// mx.quantize's affine mode stores them (mlx-lm's QuantizedKVCache). What the
// op hands to the planner, the primitive and the fallback.
#pragma once

#include <vector>

#include "mlx/array.h"
#include "mlx/stream.h"
#include "mlx_fused_attn/plan/call.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn {

/// How K and V are quantized (mx.quantize, mode "affine"). A row of D values
/// is D / group_size groups, each with a scale and a bias (value = scale *
/// code + bias). The codes are `bits` wide and packed as one little-endian
/// bit stream into the row's uint32 words (D * bits / 32 of them): with 3, 5
/// or 6 bits a code may straddle two words, and every 8 codes fill exactly
/// `bits` bytes.
struct KvQuantization {
  int bits; ///< 2, 3, 4, 5, 6 or 8
  int group_size; ///< 32, 64 or 128
};

struct QuantizedAttentionSpec {
  /// Scale, mask and sinks as the float op takes them (saves_lse is never
  /// set: the quantized op has no gradients).
  AttentionSpec attention;
  KvQuantization kv;
};

/// The inputs of a quantized call, in this order; after them the mask where
/// the call has an array mask, then the sinks where it has sinks. The
/// scales, biases, queries, an additive mask and the sinks are in the
/// output dtype.
enum QuantizedInput {
  kQuantQ, ///< queries [B, H_q, L_q, D]
  kQuantKWords, ///< keys' codes, uint32 [B, H_kv, L_k, D * bits / 32]
  kQuantKScales, ///< keys' scales [B, H_kv, L_k, D / group_size]
  kQuantKBiases, ///< keys' biases, shaped as their scales
  kQuantVWords, ///< values' codes, uint32 [B, H_kv, L_k, D_v * bits / 32]
  kQuantVScales, ///< values' scales [B, H_kv, L_k, D_v / group_size]
  kQuantVBiases, ///< values' biases, shaped as their scales
  kQuantFixedInputs, ///< how many inputs every call has
};

struct QuantizedAttentionCall {
  QuantizedAttentionSpec spec;
  std::vector<mlx::core::array> inputs; ///< QuantizedInput order
  mlx::core::Stream stream;
};

/// Index of the mask / sinks among a quantized call's inputs, or -1: the
/// float call's optional inputs (optional_inputs), after the fixed ones.
inline int quantized_mask_index(const QuantizedAttentionSpec& spec) {
  return optional_inputs(spec.attention, kQuantFixedInputs).mask;
}
inline int quantized_sinks_index(const QuantizedAttentionSpec& spec) {
  return optional_inputs(spec.attention, kQuantFixedInputs).sinks;
}

/// The output shape [B, H_q, L_q, D_v]. D_v follows from the inputs alone:
/// K's and V's rows pack D and D_v codes of one width into their words.
inline mlx::core::Shape quantized_output_shape(
    const std::vector<mlx::core::array>& inputs) {
  const auto& q = inputs[kQuantQ];
  const int D_v = static_cast<int>(
      int64_t(inputs[kQuantVWords].shape(3)) * q.shape(3) /
      inputs[kQuantKWords].shape(3));
  return {q.shape(0), q.shape(1), q.shape(2), D_v};
}

} // namespace mlx_fused_attn
