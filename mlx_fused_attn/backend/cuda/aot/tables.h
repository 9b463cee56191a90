// The AOT tables, one a file of mlx_fused_attn/families/*/aot/. Generated
// by tools/gen_instances.py; do not edit.
#pragma once

#define FA_AOT_TABLES(X) \
  X(attention_d32_dv32) \
  X(attention_d64_dv64) \
  X(attention_d72_dv72) \
  X(attention_d80_dv80) \
  X(attention_d96_dv96) \
  X(attention_d128_dv128) \
  X(attention_d192_dv128) \
  X(attention_d192_dv192) \
  X(attention_d256_dv256) \
  X(attention_split_combine) \
  X(attention_backward_row_dot) \
  X(attention_backward_d32) \
  X(attention_backward_d64) \
  X(attention_backward_d96) \
  X(attention_backward_d128) \
  X(neighborhood_1d) \
  X(neighborhood_2d) \
  X(neighborhood_3d) \
  X(quantized_attention_d32) \
  X(quantized_attention_d64) \
  X(quantized_attention_d96) \
  X(quantized_attention_d128) \
  X(quantized_attention_d192) \
  X(quantized_attention_d256) \
  X(quantized_attention_split_combine) \
  X(short_attention_d32) \
  X(short_attention_d64) \
  X(short_attention_d128) \
  X(strided_copy)
