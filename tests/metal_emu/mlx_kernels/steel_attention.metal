// MLX's steel attention kernel, instantiated as MLX's kernels/steel/attn/
// kernels/steel_attention.metal does (instantiate_kernel, defines.h):
// each element type, head dims 64 and 128, with and without a mask of the
// element type (has_mask is a function constant: one instantiation holds
// both), one and two simdgroups across the head dimension. Bool masks are
// left out: they need vectors of bool, which clang 14 does not have.
// clang-format off
#include "bfloat_arithmetic.h"
#include "mlx/backend/metal/kernels/utils.h"
#include "mlx/backend/metal/kernels/steel/attn/kernels/steel_attention.h"

#define instantiate_attn(tname, dtype, bq, bk, bd, bv, wm, wn, mname, mtype) \
  instantiate_kernel(                                                         \
      "steel_attention_" #tname "_bq" #bq "_bk" #bk "_bd" #bd "_bv" #bv      \
      "_wm" #wm "_wn" #wn "_mask" #mname,                                     \
  attention, dtype, bq, bk, bd, bv, wm, wn, mtype, float)

instantiate_attn(float16, half, 32, 16, 128, 128, 4, 1, float16, half)
instantiate_attn(float16, half, 32, 32, 64, 64, 4, 1, float16, half)
instantiate_attn(bfloat16, bfloat16_t, 32, 16, 128, 128, 4, 2, bfloat16, bfloat16_t)
instantiate_attn(bfloat16, bfloat16_t, 32, 32, 64, 64, 4, 1, bfloat16, bfloat16_t)
instantiate_attn(float32, float, 32, 32, 64, 64, 4, 1, float32, float)
instantiate_attn(float32, float, 32, 16, 128, 128, 4, 2, float32, float)
// clang-format on
