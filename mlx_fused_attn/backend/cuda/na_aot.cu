// nvcc-built neighborhood kernels for one number of spatial axes,
// FA_NA_AOT_AXES (set by cmake/cuda.cmake, which compiles this file once
// per entry of FA_NA_AXES): every dtype and head dim of FA_NA_HEAD_DIMS,
// with the tiles choose_na_tiles gives them.
#include "mlx_fused_attn/backend/cuda/na_kernel.cuh"

#include "mlx_fused_attn/backend/cuda/na_aot.h"
#include "mlx_fused_attn/tile/dtype_of.h"

#ifndef FA_NA_AOT_AXES
#error "compile with -DFA_NA_AOT_AXES=<1, 2 or 3>"
#endif

static_assert(
    FA_NA_AOT_AXES >= 1 && FA_NA_AOT_AXES <= fa::kNaMaxAxes,
    "FA_NA_AOT_AXES is not in FA_NA_AXES");

namespace {

template <typename T, int D>
const void* instance() {
  constexpr fa::NaTiles t =
      fa::choose_na_tiles(
      D, fa::DTypeOf<T>::value, fa::Backend::Cuda, FA_NA_AOT_AXES);
  return reinterpret_cast<const void*>(
      &fa::na_attention_kernel<
          T, D, fa::na_tile_queries(t), t.key_block, t.warps, t.stages,
          t.min_blocks, FA_NA_AOT_AXES>);
}

template <typename T>
const void* instance(int head_dim) {
  switch (head_dim) {
#define FA_NA_AOT_CASE(d) \
  case d:                 \
    return instance<T, d>();
    FA_NA_HEAD_DIMS(FA_NA_AOT_CASE)
#undef FA_NA_AOT_CASE
  }
  return nullptr;
}

} // namespace

#define FA_NA_AOT_NAME_(n) aot_na_kernel_n##n
#define FA_NA_AOT_NAME(n) FA_NA_AOT_NAME_(n)

namespace mlx_fused_attn::cuda {

const void* FA_NA_AOT_NAME(FA_NA_AOT_AXES)(fa::DType dtype, int head_dim) {
  switch (dtype) {
    case fa::DType::Float16:
      return instance<fa::half_t>(head_dim);
    case fa::DType::BFloat16:
      return instance<fa::bfloat_t>(head_dim);
    case fa::DType::Float32:
      return instance<float>(head_dim);
  }
  return nullptr;
}

} // namespace mlx_fused_attn::cuda
