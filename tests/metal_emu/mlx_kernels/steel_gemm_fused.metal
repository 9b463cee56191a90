// MLX's fused steel GEMM, instantiated as MLX's kernels/steel/gemm/kernels/
// steel_gemm_fused.metal does: each element type, the four transpositions
// across them, and four of MLX's tile shapes.
// clang-format off
#include "bfloat_arithmetic.h"
#include "mlx/backend/metal/kernels/utils.h"
#include "mlx/backend/metal/kernels/steel/gemm/gemm.h"
#include "mlx/backend/metal/kernels/steel/gemm/kernels/steel_gemm_fused.h"

#define instantiate_gemm(tname, trans_a, trans_b, iname, itype, oname, otype, bm, bn, bk, wm, wn) \
  instantiate_kernel(                                                                             \
      "steel_gemm_fused_" #tname "_"  #iname "_" #oname                                           \
      "_bm" #bm "_bn" #bn "_bk" #bk "_wm" #wm "_wn" #wn,                                          \
  gemm, itype, bm, bn, bk, wm, wn, trans_a, trans_b, float)

instantiate_gemm(nn, false, false, float16, half, float16, half, 64, 64, 16, 2, 2)
instantiate_gemm(nt, false, true, bfloat16, bfloat16_t, bfloat16, bfloat16_t, 64, 32, 32, 2, 2)
instantiate_gemm(tn, true, false, float32, float, float32, float, 32, 64, 16, 1, 2)
instantiate_gemm(tt, true, true, float16, half, float16, half, 64, 32, 8, 4, 1)
// clang-format on
