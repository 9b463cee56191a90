// nvcc-built attention kernels for one pair of head dims, FA_AOT_HEAD_DIM
// (q and k) and FA_AOT_HEAD_DIM_V (v; set by cmake/cuda.cmake, which
// compiles this file once per entry of FA_ATTENTION_HEAD_DIMS): every dtype, and the causal, array-mask and
// unmasked variants, with the tiles choose_attention_tiles gives them, for
// GPUs with and without warpgroup products (the former run only from the
// sm_90a image; fp32 instances are the same kernel either way) and for
// grids of one wave or more (the same kernel where the tiles agree).
#include "mlx_fused_attn/backend/cuda/aot_kernels.h"
#include "mlx_fused_attn/backend/cuda/attention_kernel.cuh"
#include "mlx_fused_attn/tile/dtype_of.h"

#if !defined(FA_AOT_HEAD_DIM) || !defined(FA_AOT_HEAD_DIM_V)
#error "compile with -DFA_AOT_HEAD_DIM=<d> -DFA_AOT_HEAD_DIM_V=<d of v>"
#endif

static_assert(
    fa::attention_head_dims_supported(FA_AOT_HEAD_DIM, FA_AOT_HEAD_DIM_V),
    "(FA_AOT_HEAD_DIM, FA_AOT_HEAD_DIM_V) is not in FA_ATTENTION_HEAD_DIMS");

namespace {

template <typename T, bool kWgmma, bool kLarge, bool kCausal, bool kHasMask>
const void* instance() {
  constexpr int D = FA_AOT_HEAD_DIM;
  constexpr int DV = FA_AOT_HEAD_DIM_V;
  constexpr fa::AttnTiles t = fa::choose_attention_tiles(
      D, DV, fa::DTypeOf<T>::value, fa::Backend::Cuda, kWgmma,
      kLarge);
  return reinterpret_cast<const void*>(
      &fa::attention_kernel<
          T, D, DV, t.bq, t.bk, t.warps, t.stages, t.min_blocks, t.wgmma,
          t.q_shared, kCausal, kHasMask>);
}

template <typename T, bool kWgmma, bool kLarge>
const void* instance(bool causal, bool has_mask) {
  if (causal) {
    return instance<T, kWgmma, kLarge, true, false>();
  }
  return has_mask ? instance<T, kWgmma, kLarge, false, true>()
                  : instance<T, kWgmma, kLarge, false, false>();
}

template <typename T>
const void*
instance(bool causal, bool has_mask, bool wgmma, bool large_grid) {
  if (!wgmma) {
    return large_grid ? instance<T, false, true>(causal, has_mask)
                      : instance<T, false, false>(causal, has_mask);
  }
  return large_grid ? instance<T, true, true>(causal, has_mask)
                    : instance<T, true, false>(causal, has_mask);
}

} // namespace

#define FA_AOT_NAME_(d, dv) aot_attention_kernel_d##d##_dv##dv
#define FA_AOT_NAME(d, dv) FA_AOT_NAME_(d, dv)

namespace mlx_fused_attn::cuda {

const void* FA_AOT_NAME(FA_AOT_HEAD_DIM, FA_AOT_HEAD_DIM_V)(
    fa::DType dtype,
    bool causal,
    bool has_mask,
    bool wgmma,
    bool large_grid) {
  switch (dtype) {
    case fa::DType::Float16:
      return instance<fa::half_t>(causal, has_mask, wgmma, large_grid);
    case fa::DType::BFloat16:
      return instance<fa::bfloat_t>(causal, has_mask, wgmma, large_grid);
    case fa::DType::Float32:
      return instance<float>(causal, has_mask, wgmma, large_grid);
  }
  return nullptr;
}

} // namespace mlx_fused_attn::cuda
