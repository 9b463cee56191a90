// Metal entry points of the fused attention backward and their
// instantiation list. The bodies are mlx_fused_attn/kernels/
// attention_backward.h; this file binds buffers, declares the threadgroup
// memory and the function constants (the forward's features; has_sinks is
// unused: a sink enters only through the LSE), and names the kernels per
// (dtype, head dim) with the tiles choose_attention_backward_tiles picks.
//
// Their D comes first from attention_backward_row_dot.metal.
// fa_attention_bwd_dkdv: 0 q, 1 k, 2 v, 3 dO, 4 LSE, 5 D, 6 dK, 7 dV,
//   8 params, 9 mask (has_mask), 10 the mask's block lists (mask_blocks;
//   kernels/mask_visits.h). Grid (ceil(L_k / bq), H_kv, B).
// fa_attention_bwd_dq: 0 q, 1 k, 2 v, 3 dO, 4 LSE, 5 D, 6 dQ, 8 params,
//   9 mask (has_mask), 10 the lists (mask_blocks). Grid (ceil(L_q / bq),
//   H_q, B).
// Threadgroups: (32, warps, 1). align_q and align_k say that L_q and L_k
// are whole blocks of the kernel: bq keys and bk queries for dK/dV, bq
// queries and bk keys for dQ.

#include "mlx_fused_attn/families/attention_backward/attention_backward.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/tile/dtype_of.h"
#include "mlx_fused_attn/tile/metal_target.h"

using namespace metal;

#define FA_DECLARE_FUNCTION_CONSTANT(name, index) \
  constant bool fc_##name [[function_constant(index)]];
FA_ATTENTION_FEATURES(FA_DECLARE_FUNCTION_CONSTANT)
#undef FA_DECLARE_FUNCTION_CONSTANT

namespace {

fa::AttnFeatures read_features() {
  fa::AttnFeatures features;
#define FA_READ_FUNCTION_CONSTANT(name, index) features.name = fc_##name;
  FA_ATTENTION_FEATURES(FA_READ_FUNCTION_CONSTANT)
#undef FA_READ_FUNCTION_CONSTANT
  return features;
}

/// The shape of the (T, D) kernels, checked against the chooser.
template <typename T, int D, int BQ, int BK, int WM>
struct BwdShapeOf {
  typedef fa::AttnShape<T, D, BQ, BK, WM, 1> type;
  typedef fa::AttnKBlock<fa::MetalTarget, type> Block;
  static_assert(
      fa::AttnTiles{BQ, BK, WM, 1} ==
              fa::choose_attention_backward_tiles(
                  D, fa::DTypeOf<T>::value, fa::Backend::Metal)
                  .dkdv &&
          fa::AttnTiles{BQ, BK, WM, 1} ==
              fa::choose_attention_backward_tiles(
                  D, fa::DTypeOf<T>::value, fa::Backend::Metal)
                  .dq,
      "instantiation list disagrees with choose_attention_backward_tiles");
  static_assert(
      2 * Block::kElems * sizeof(T) ==
          fa::attention_backward_smem_bytes(
              fa::AttnTiles{BQ, BK, WM, 1}, D, fa::DTypeOf<T>::value,
              fa::Backend::Metal),
      "attention_backward_smem_bytes disagrees with the threadgroup arrays");
  static_assert(
      2 * Block::kElems * sizeof(T) <= fa::kMetalMaxThreadgroupBytes,
      "threadgroup arrays over Metal's threadgroup memory");
  // The owned rows' operands stay in registers: the bodies' operand memory
  // argument is then unused (the streamed blocks' array is passed).
  static_assert(
      fa::AttnQOperand<fa::MetalTarget, type>::kSmemElems == 0,
      "Metal keeps the owned rows' operands in registers");
};

} // namespace

template <typename T, int D, int BQ, int BK, int WM>
[[kernel, max_total_threads_per_threadgroup(WM* fa::kSimdWidth)]] void
fa_attention_bwd_dkdv(
    const device T* q [[buffer(0)]],
    const device T* k [[buffer(1)]],
    const device T* v [[buffer(2)]],
    const device T* dout [[buffer(3)]],
    const device float* lse [[buffer(4)]],
    const device float* d [[buffer(5)]],
    device T* dk [[buffer(6)]],
    device T* dv [[buffer(7)]],
    constant fa::AttnBwdParams& params [[buffer(8)]],
    const device uchar* mask [[buffer(9), function_constant(fc_has_mask)]],
    const device uint* lists [[buffer(10), function_constant(fc_mask_blocks)]],
    uint3 tgid [[threadgroup_position_in_grid]],
    uint warp [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]]) {
  typedef BwdShapeOf<T, D, BQ, BK, WM> S;
  FA_SHARED_ARRAY_DECL T q_smem[S::Block::kElems];
  FA_SHARED_ARRAY_DECL T do_smem[S::Block::kElems];
  const fa::AttnBwdArrays<T> arrays = {
      q, k, v, dout, lse, d, nullptr, dk, dv, mask, lists, nullptr};
  const fa::AttnBwdSmem<T> smem = {q_smem, do_smem, q_smem, q_smem};
  const fa::AttnBwdPlace place = {int(tgid.x), int(tgid.y), int(tgid.z)};
  fa::attention_backward_dkdv<fa::MetalTarget, typename S::type>(
      arrays, params, smem, read_features(), place, warp, lane);
}

template <typename T, int D, int BQ, int BK, int WM>
[[kernel, max_total_threads_per_threadgroup(WM* fa::kSimdWidth)]] void
fa_attention_bwd_dq(
    const device T* q [[buffer(0)]],
    const device T* k [[buffer(1)]],
    const device T* v [[buffer(2)]],
    const device T* dout [[buffer(3)]],
    const device float* lse [[buffer(4)]],
    const device float* d [[buffer(5)]],
    device T* dq [[buffer(6)]],
    constant fa::AttnBwdParams& params [[buffer(8)]],
    const device uchar* mask [[buffer(9), function_constant(fc_has_mask)]],
    const device uint* lists [[buffer(10), function_constant(fc_mask_blocks)]],
    uint3 tgid [[threadgroup_position_in_grid]],
    uint warp [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]]) {
  typedef BwdShapeOf<T, D, BQ, BK, WM> S;
  FA_SHARED_ARRAY_DECL T k_smem[S::Block::kElems];
  FA_SHARED_ARRAY_DECL T v_smem[S::Block::kElems];
  const fa::AttnBwdArrays<T> arrays = {
      q, k, v, dout, lse, d, dq, nullptr, nullptr, mask, lists, nullptr};
  const fa::AttnBwdSmem<T> smem = {k_smem, v_smem, k_smem, k_smem};
  const fa::AttnBwdPlace place = {int(tgid.x), int(tgid.y), int(tgid.z)};
  fa::attention_backward_dq<fa::MetalTarget, typename S::type>(
      arrays, params, smem, read_features(), place, warp, lane);
}

// Names must match attention_backward_kernel_name() in
// mlx_fused_attn/families/attention_backward/attention_backward_kernel_name.h.
#define FA_BWD_INSTANTIATE(tname, T, D, BQ, BK, WM)                     \
  template [[host_name(                                                 \
      "fa_attention_bwd_dkdv_" #tname "_d" #D "_bq" #BQ "_bk" #BK       \
      "_wm" #WM)]] [[kernel]]                                           \
  decltype(fa_attention_bwd_dkdv<T, D, BQ, BK, WM>)                     \
      fa_attention_bwd_dkdv<T, D, BQ, BK, WM>;                          \
  template [[host_name(                                                 \
      "fa_attention_bwd_dq_" #tname "_d" #D "_bq" #BQ "_bk" #BK         \
      "_wm" #WM)]] [[kernel]]                                           \
  decltype(fa_attention_bwd_dq<T, D, BQ, BK, WM>)                       \
      fa_attention_bwd_dq<T, D, BQ, BK, WM>;

// BEGIN INSTANCES (tools/gen_instances.py; do not edit)
FA_BWD_INSTANTIATE(float16, half, 32, 32, 64, 4)
FA_BWD_INSTANTIATE(float16, half, 64, 32, 64, 4)
FA_BWD_INSTANTIATE(float16, half, 96, 32, 64, 4)
FA_BWD_INSTANTIATE(float16, half, 128, 32, 32, 4)
FA_BWD_INSTANTIATE(bfloat16, bfloat, 32, 32, 64, 4)
FA_BWD_INSTANTIATE(bfloat16, bfloat, 64, 32, 64, 4)
FA_BWD_INSTANTIATE(bfloat16, bfloat, 96, 32, 64, 4)
FA_BWD_INSTANTIATE(bfloat16, bfloat, 128, 32, 32, 4)
FA_BWD_INSTANTIATE(float32, float, 32, 32, 64, 4)
FA_BWD_INSTANTIATE(float32, float, 64, 32, 32, 4)
FA_BWD_INSTANTIATE(float32, float, 96, 32, 32, 4)
FA_BWD_INSTANTIATE(float32, float, 128, 32, 16, 4)
// END INSTANCES
