// MLX's reductions, instantiated as MLX's kernels/reduce.metal does: the
// output initialisation, the whole-array reduction, and the small, looped
// and simple row reductions and small, looped and two-pass column
// reductions, for a sum of half and of float, a max of bfloat and an
// `and` of floats into bool.
// clang-format off
#include "bfloat_arithmetic.h"
#include <metal_atomic>
#include <metal_simdgroup>
#include "mlx/backend/metal/kernels/defines.h"
#include "mlx/backend/metal/kernels/utils.h"
#include "mlx/backend/metal/kernels/atomic.h"
#include "mlx/backend/metal/kernels/reduction/ops.h"
#include "mlx/backend/metal/kernels/reduce.h"

#define instantiate_init_reduce(name, tname, type, op) \
  instantiate_kernel("init_reduce_" #name #tname, init_reduce, type, op<type>)

#define instantiate_all_reduce(name, itype, otype, op) \
  instantiate_kernel("all_reduce_" #name, all_reduce, itype, otype, op)

#define instantiate_row_reduce(name, itype, otype, op, dim)                         \
  instantiate_kernel("row_reduce_small_" #dim "_reduce_" #name,                     \
                     row_reduce_small, itype, otype, op, int, dim)                  \
  instantiate_kernel("row_reduce_looped_large_" #dim "_reduce_" #name,              \
                     row_reduce_looped, itype, otype, op, int64_t, dim)             \
  instantiate_kernel("row_reduce_simple_" #name, row_reduce_simple, itype, otype, op)

#define instantiate_col_reduce(name, itype, otype, op, dim)                         \
  instantiate_kernel("col_reduce_small_" #dim "_reduce_" #name,                     \
                     col_reduce_small, itype, otype, op, int, dim)                  \
  instantiate_kernel("col_reduce_longcolumn_" #dim "_reduce_" #name,                \
                     col_reduce_longcolumn, itype, otype, op, int, dim)             \
  instantiate_kernel("col_reduce_looped_" #dim "_32_32_reduce_" #name,              \
                     col_reduce_looped, itype, otype, op, int, dim, 32, 32)         \
  instantiate_kernel("col_reduce_2pass_large_" #dim "_32_32_reduce_" #name,         \
                     col_reduce_2pass, itype, otype, op, int64_t, dim, 32, 32)

instantiate_init_reduce(sum, float32, float, Sum)
instantiate_init_reduce(max, bfloat16, bfloat16_t, Max)
instantiate_all_reduce(sumfloat16, float16_t, float16_t, Sum<float16_t>)
instantiate_all_reduce(andfloat32, float, bool, And<bool>)
instantiate_row_reduce(sumfloat32, float, float, Sum<float>, 2)
instantiate_row_reduce(maxbfloat16, bfloat16_t, bfloat16_t, Max<bfloat16_t>, 1)
instantiate_col_reduce(sumfloat16, float16_t, float16_t, Sum<float16_t>, 1)
instantiate_col_reduce(maxbfloat16, bfloat16_t, bfloat16_t, Max<bfloat16_t>, 5)
// clang-format on
