// The parameters of a quantized K/V cache that the kernels read on top of
// AttnParams (params.h), shared by the host code and every kernel. Plain old
// data, as params.h: copied byte for byte into a Metal constant buffer or a
// CUDA kernel argument.
#pragma once

#include "mlx_fused_attn/params.h"

namespace fa {

/// K or V, quantized: strides for the batch, head and key axes, in uint32
/// words for the codes and in elements for the scales and biases. A row's
/// words are contiguous; its scales and biases may step by `*_group_stride`.
struct QuantKvOperand {
  stride_t word_strides[3];
  stride_t scale_strides[3];
  stride_t bias_strides[3];
  stride_t scale_group_stride; ///< between a row's consecutive scales
  stride_t bias_group_stride; ///< between a row's consecutive biases
};

struct QuantKvParams {
  int bits; ///< code width: 2, 3, 4, 5, 6 or 8
  int group_size; ///< codes sharing a scale and a bias: 32, 64 or 128
  QuantKvOperand k; ///< the keys (D codes a row)
  QuantKvOperand v; ///< the values (D_v codes a row)
};

} // namespace fa
