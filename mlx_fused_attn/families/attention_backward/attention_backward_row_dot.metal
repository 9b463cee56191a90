// Metal entry point of the backward's preprocessing, D = rowsum(dO * O)
// (fp32 [B, H_q, L_q]), for the kernels of attention_backward.metal; the
// body is attention_backward_row_dot in mlx_fused_attn/kernels/
// attention_backward.h.
//
// Buffers: 0 o, 1 dO, 2 D, 3 params. Grid (ceil(L_q / warps), H_q, B);
// threadgroup (32, warps, 1): a warp a row.

#include "mlx_fused_attn/families/attention_backward/attention_backward.h"

using namespace metal;

template <typename T>
[[kernel]] void fa_attention_bwd_row_dot(
    const device T* o [[buffer(0)]],
    const device T* dout [[buffer(1)]],
    device float* d [[buffer(2)]],
    constant fa::AttnBwdParams& params [[buffer(3)]],
    uint3 tgid [[threadgroup_position_in_grid]],
    uint3 tg_size [[threads_per_threadgroup]],
    uint warp [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]]) {
  const fa::AttnBwdRow r = {
      int(tgid.x * tg_size.y + warp), int(tgid.y), int(tgid.z)};
  fa::attention_backward_row_dot(o, dout, d, params, r, lane);
}

// Names must match attention_backward_row_dot_name() in
// mlx_fused_attn/families/attention_backward/attention_backward_kernel_name.h.
#define FA_BWD_ROW_DOT_INSTANTIATE(tname, T)                          \
  template [[host_name("fa_attention_bwd_row_dot_" #tname)]] [[kernel]] \
  decltype(fa_attention_bwd_row_dot<T>) fa_attention_bwd_row_dot<T>;

// BEGIN INSTANCES (tools/gen_instances.py; do not edit)
FA_BWD_ROW_DOT_INSTANTIATE(float16, half)
FA_BWD_ROW_DOT_INSTANTIATE(bfloat16, bfloat)
FA_BWD_ROW_DOT_INSTANTIATE(float32, float)
// END INSTANCES
