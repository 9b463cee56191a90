// MLX's vector (decode) attention kernels, instantiated as MLX's
// kernels/scaled_dot_product_attention.metal does: the one-pass kernel and
// the first pass of the two-pass kernel for each element type at head dims
// 64 and 128, the grouped-query first pass, and the second pass.
// clang-format off
#include "bfloat_arithmetic.h"
#include <metal_stdlib>
#include "mlx/backend/metal/kernels/utils.h"
#include "mlx/backend/metal/kernels/sdpa_vector.h"

using namespace metal;

#define instantiate_sdpa_vector_aggregation(type, value_dim) \
  instantiate_kernel(                                        \
      "sdpa_vector_2pass_2_" #type "_" #value_dim,           \
      sdpa_vector_2pass_2,                                   \
      type,                                                  \
      value_dim)

#define instantiate_sdpa_vector(type, qk_dim, value_dim)       \
  instantiate_kernel(                                          \
      "sdpa_vector_" #type "_" #qk_dim "_" #value_dim,         \
      sdpa_vector,                                             \
      type,                                                    \
      qk_dim,                                                  \
      value_dim)                                               \
  instantiate_kernel(                                          \
      "sdpa_vector_2pass_1_" #type "_" #qk_dim "_" #value_dim, \
      sdpa_vector_2pass_1,                                     \
      type,                                                    \
      qk_dim,                                                  \
      value_dim)

#define instantiate_sdpa_vector_gqa(type, qk_dim, value_dim, hpt)  \
  instantiate_kernel(                                              \
      "sdpa_vector_2pass_1_gqa_" #type "_" #qk_dim "_" #value_dim, \
      sdpa_vector_2pass_1_gqa,                                     \
      type,                                                        \
      qk_dim,                                                      \
      value_dim,                                                   \
      8,                                                           \
      hpt)

instantiate_sdpa_vector(float16_t, 64, 64)
instantiate_sdpa_vector(bfloat16_t, 128, 128)
instantiate_sdpa_vector(float, 128, 128)
instantiate_sdpa_vector_gqa(float16_t, 128, 128, 4)
instantiate_sdpa_vector_aggregation(float16_t, 64)
instantiate_sdpa_vector_aggregation(bfloat16_t, 128)
instantiate_sdpa_vector_aggregation(float, 128)
// clang-format on
