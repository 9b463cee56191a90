// The body of every family's combine kernel on CUDA (split_keys.h): each
// family instantiates its own kernel, in its own file, around this one.
#pragma once

#include "mlx_fused_attn/kernels/cuda/block_sizes.h"
#include "mlx_fused_attn/kernels/split_combine_form.h"
#include "mlx_fused_attn/kernels/split_keys.h"
#include "mlx_fused_attn/params.h"

namespace fa {

/// The combine of split keys by one block of kSplitCombineThreads, in the
/// form kForm (split_combine_form.h): one output element a thread, grid
/// (ceil(L_q * D_v / kSplitCombineThreads), H_q, B), or one row a block
/// (RowThreadgroup), grid (L_q, H_q, B).
template <typename T, SplitCombineForm kForm>
__device__ __forceinline__ void split_combine_block(
    const float* o_part,
    const float* stats,
    T* out,
    const AttnParams& params,
    int n_splits) {
  if constexpr (kForm == SplitCombineForm::RowThreadgroup) {
    static_assert(
        kSplitCombineThreads == kRowCombineWarps * kSimdWidth,
        "a row's simdgroups are the block");
    __shared__ float scratch[kRowCombineScratch];
    const SplitRow at = {
        int(blockIdx.x), int(blockIdx.y), int(blockIdx.z)};
    split_combine_row(
        o_part, stats, out, params, n_splits, at, scratch, int(threadIdx.x));
  } else {
    split_combine_element_in<T, kForm>(
        o_part, stats, out, params, n_splits,
        blockIdx.x * kSplitCombineThreads + threadIdx.x, blockIdx.y,
        blockIdx.z);
  }
}

} // namespace fa
