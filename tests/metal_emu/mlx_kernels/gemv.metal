// MLX's matrix-vector products, instantiated as MLX's kernels/gemv.metal
// does: the product with the matrix and with its transpose, for float, half
// and bfloat, batched or not, with and without the scaled bias.
// clang-format off
#include "bfloat_arithmetic.h"
#include <metal_simdgroup>
#include <metal_stdlib>
#include "mlx/backend/metal/kernels/gemv.h"

using namespace metal;

#define instantiate_gemv_helper(name, itype, bm, bn, sm, sn, tm, tn, nc, axpby) \
  instantiate_kernel(                                                           \
      "gemv_" #name "_bm" #bm "_bn" #bn "_sm" #sm "_sn" #sn "_tm" #tm           \
      "_tn" #tn "_nc" #nc "_axpby" #axpby,                                      \
      gemv, itype, bm, bn, sm, sn, tm, tn, nc, axpby)

#define instantiate_gemv_t_helper(name, itype, bm, bn, sm, sn, tm, tn, nc, axpby) \
  instantiate_kernel(                                                             \
    "gemv_t_" #name "_bm" #bm "_bn" #bn "_sm" #sm "_sn" #sn                       \
       "_tm" #tm "_tn" #tn "_nc" #nc "_axpby" #axpby,                             \
  gemv_t, itype, bm, bn, sm, sn, tm, tn, nc, axpby)

instantiate_gemv_helper(float32, float, 4, 1, 1, 32, 4, 4, 0, 0)
instantiate_gemv_helper(float16, half, 1, 8, 1, 32, 4, 4, 1, 1)
instantiate_gemv_helper(bfloat16, bfloat16_t, 1, 1, 8, 4, 1, 4, 0, 1)
instantiate_gemv_t_helper(float32, float, 1, 2, 8, 4, 4, 1, 1, 0)
instantiate_gemv_t_helper(float16, half, 1, 16, 8, 4, 4, 4, 0, 1)
instantiate_gemv_t_helper(bfloat16, bfloat16_t, 1, 4, 8, 4, 4, 4, 1, 1)
// clang-format on
