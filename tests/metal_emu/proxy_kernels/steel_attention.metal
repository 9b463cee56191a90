// MLX's steel attention kernel (mx.fast's Metal kernel for L_q > 8) in the
// instances the speed proxy counts (../proxy.py): those MLX's
// sdpa_full_self_attention_metal dispatches on GPUs without neural
// accelerators (M1 to M4), bq 32, bk 32 below head dim 128 and 16 from it,
// 4 x 1 simdgroups, bv = bd, the mask type the element type, for half and
// bfloat at head dims 64, 80 and 128. Instantiated as MLX's own
// instantiation file does (instantiate_kernel, defines.h), host names in its
// pattern. Built by proxy.mlx_program with MLX's headers (mlx_emu.py).
// clang-format off
#include "mlx/backend/metal/kernels/utils.h"
#include "mlx/backend/metal/kernels/steel/attn/kernels/steel_attention.h"

#define instantiate_attn(tname, dtype, bk, bd)                              \
  instantiate_kernel(                                                       \
      "steel_attention_" #tname "_bq32_bk" #bk "_bd" #bd "_bv" #bd          \
      "_wm4_wn1_mask" #tname,                                               \
  attention, dtype, 32, bk, bd, bd, 4, 1, dtype, float)

instantiate_attn(float16, half, 32, 64)
instantiate_attn(float16, half, 32, 80)
instantiate_attn(float16, half, 16, 128)
instantiate_attn(bfloat16, bfloat16_t, 32, 64)
instantiate_attn(bfloat16, bfloat16_t, 32, 80)
instantiate_attn(bfloat16, bfloat16_t, 16, 128)
// clang-format on
