// nvcc-built short-sequence kernels for one head dim, FA_SHORT_AOT_HEAD_DIM
// (set by cmake/cuda.cmake, which compiles this file once per entry of
// FA_SHORT_ATTENTION_HEAD_DIMS): every dtype and sequence capacity, with the
// tiles choose_short_attention_tiles gives them.
#include "mlx_fused_attn/backend/cuda/short_attention_aot.h"
#include "mlx_fused_attn/backend/cuda/short_attention_kernel.cuh"
#include "mlx_fused_attn/tile/dtype_of.h"

#ifndef FA_SHORT_AOT_HEAD_DIM
#error "compile with -DFA_SHORT_AOT_HEAD_DIM=<head dim>"
#endif

static_assert(
    fa::short_attention_head_dim_supported(FA_SHORT_AOT_HEAD_DIM),
    "FA_SHORT_AOT_HEAD_DIM is not in FA_SHORT_ATTENTION_HEAD_DIMS");

namespace {

template <typename T, int kSeq>
const void* instance() {
  constexpr int D = FA_SHORT_AOT_HEAD_DIM;
  constexpr fa::ShortAttnTiles t = fa::choose_short_attention_tiles(
      D, fa::DTypeOf<T>::value, fa::Backend::Cuda, kSeq);
  return reinterpret_cast<const void*>(
      &fa::short_attention_kernel<
          T, D, t.seq, t.warp_rows, t.warps, t.problems>);
}

template <typename T>
const void* instance(int seq) {
  switch (seq) {
#define FA_SHORT_AOT_SEQ_CASE(s) \
  case s:                        \
    return instance<T, s>();
    FA_SHORT_ATTENTION_SEQS(FA_SHORT_AOT_SEQ_CASE)
#undef FA_SHORT_AOT_SEQ_CASE
  }
  return nullptr;
}

} // namespace

#define FA_SHORT_AOT_NAME_(d) aot_short_attention_kernel_d##d
#define FA_SHORT_AOT_NAME(d) FA_SHORT_AOT_NAME_(d)

namespace mlx_fused_attn::cuda {

const void* FA_SHORT_AOT_NAME(FA_SHORT_AOT_HEAD_DIM)(fa::DType dtype, int seq) {
  switch (dtype) {
    case fa::DType::Float16:
      return instance<fa::half_t>(seq);
    case fa::DType::BFloat16:
      return instance<fa::bfloat_t>(seq);
    case fa::DType::Float32:
      return instance<float>(seq);
  }
  return nullptr;
}

} // namespace mlx_fused_attn::cuda
