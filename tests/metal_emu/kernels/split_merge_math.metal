// split_keys.h's merge of split keys as CUDA runs it: as the last split
// merges (kernels/cuda/split_merge.cuh), several output elements a thread
// (split_combine_elements) and each row's merged log-sum-exp
// (split_combine_lse), one threadgroup a (head, batch), its threads over
// every row; and as the combine kernel's RowThreadgroup form
// (split_combine_row), one threadgroup a row. The merge's math is shared,
// so the emulator checks it here for the GPU it cannot run.
#include <metal_stdlib>

#include "mlx_fused_attn/kernels/split_keys.h"

using namespace metal;

[[kernel]] void merge_four_elements_a_thread(
    const device float* o_part [[buffer(0)]],
    const device float* stats [[buffer(1)]],
    device float* out [[buffer(2)]],
    constant fa::AttnParams& params [[buffer(3)]],
    constant int& n_splits [[buffer(4)]],
    device float* lse [[buffer(5)]],
    uint3 tid [[thread_position_in_threadgroup]],
    uint3 tg [[threadgroup_position_in_grid]],
    uint3 threads [[threads_per_threadgroup]]) {
  const int n = params.L_q * params.D_v;
  const int stride = int(threads.x);
  for (int i = int(tid.x); i < n; i += 4 * stride) {
    const fa::SplitElems e = {i, stride, n, int(tg.y), int(tg.z)};
    fa::split_combine_elements<4>(o_part, stats, out, params, n_splits, e);
  }
  for (int r = int(tid.x); r < params.L_q; r += stride) {
    fa::split_combine_lse(
        stats, lse, params, n_splits, r, int(tg.y), int(tg.z));
  }
}

[[kernel]] void merge_a_row_a_threadgroup(
    const device float* o_part [[buffer(0)]],
    const device float* stats [[buffer(1)]],
    device float* out [[buffer(2)]],
    constant fa::AttnParams& params [[buffer(3)]],
    constant int& n_splits [[buffer(4)]],
    uint3 tg [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]]) {
  FA_SHARED_ARRAY_DECL float scratch[fa::kRowCombineScratch];
  const fa::SplitRow at = {int(tg.x), int(tg.y), int(tg.z)};
  fa::split_combine_row(
      o_part, stats, out, params, n_splits, at, scratch, int(tid));
}
