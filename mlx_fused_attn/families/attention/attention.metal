// Metal entry point of the fused attention kernel and its instantiation list.
// The body is mlx_fused_attn/kernels/attention.h; this file binds buffers,
// declares the threadgroup memory and the function constants, and names one
// kernel per (dtype, head dims of q and k, and of v) with the tiles
// choose_attention_tiles picks.
//
// Buffers: 0 q, 1 k, 2 v, 3 out, 4 params, 5 mask (has_mask; bool or T as
// bool_mask says), 6 sinks (has_sinks), 7 partial outputs, 8 their
// row statistics and 9 the split count (split_keys), 10 the rows' LSE
// (has_lse; fp32 [B, H_q, L_q]), 11 the mask's classes by block
// (mask_blocks; kernels/mask_visits.h). Grid: (query blocks * splits, H_q,
// B); threadgroup: (32, warps, 1).
//
// Besides the default kernels, the variants a Mac user can time
// (MetalAttnVariant, attention_config.h; backend/metal/attention_variant.h):
// instances with Q in threadgroup memory or other key blocks, and the
// function constant stride32 of every instance (attention_features.h).
//
// The combine of split keys, fa_split_combine_<dtype>, binds the same
// indices: 3 out, 4 params, 7 partial outputs, 8 their row statistics, 9
// the split count; grid (threads): (L_q * D_v or more, H_q, B).

#include "mlx_fused_attn/kernels/attention.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/split_keys.h"
#include "mlx_fused_attn/tile/dtype_of.h"
#include "mlx_fused_attn/tile/metal_target.h"

using namespace metal;

#define FA_DECLARE_FUNCTION_CONSTANT(name, index) \
  constant bool fc_##name [[function_constant(index)]];
FA_ATTENTION_FEATURES(FA_DECLARE_FUNCTION_CONSTANT)
#undef FA_DECLARE_FUNCTION_CONSTANT

// QS 1: Q in threadgroup memory (a variant to time; MetalAttnVariant in
// attention_config.h), which adds Q's rows after V's. An int, not a bool:
// the conformance pass matches instances to the AST's template arguments,
// where clang writes a bool as 0 or -1.
template <typename T, int D, int DV, int BQ, int BK, int WM, int QS>
[[kernel, max_total_threads_per_threadgroup(WM* fa::kSimdWidth)]] void
fa_attention(
    const device T* q [[buffer(0)]],
    const device T* k [[buffer(1)]],
    const device T* v [[buffer(2)]],
    device T* out [[buffer(3)]],
    constant fa::AttnParams& params [[buffer(4)]],
    const device uchar* mask [[buffer(5), function_constant(fc_has_mask)]],
    const device T* sinks [[buffer(6), function_constant(fc_has_sinks)]],
    device float* o_part [[buffer(7), function_constant(fc_split_keys)]],
    device float* stats [[buffer(8), function_constant(fc_split_keys)]],
    constant int* n_splits [[buffer(9), function_constant(fc_split_keys)]],
    device float* lse [[buffer(10), function_constant(fc_has_lse)]],
    const device uint* mask_blocks
    [[buffer(11), function_constant(fc_mask_blocks)]],
    uint3 tgid [[threadgroup_position_in_grid]],
    uint warp [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]]) {
  // Metal's loads are plain (synchronous) loads: one K/V stage.
  constexpr fa::AttnTiles tiles = {BQ, BK, WM, 1, 1, false, QS == 1};
  constexpr fa::DType dtype = fa::DTypeOf<T>::value;
  constexpr fa::Backend kMetal = fa::Backend::Metal;
  constexpr fa::MetalAttnVariant variant = {QS == 1, BK, false};
  static_assert(
      tiles ==
          fa::choose_attention_tiles(
              D, DV, dtype, kMetal, false, false, variant),
      "instantiation list disagrees with choose_attention_tiles");
  typedef typename fa::MetalTargetOf<QS == 1>::type Target;
  typedef fa::AttnShape<T, D, BQ, BK, WM, tiles.stages, DV> Shape;

  FA_SHARED_ARRAY_DECL T
      k_smem[Shape::kStages * fa::AttnKBlock<Target, Shape>::kElems];
  FA_SHARED_ARRAY_DECL T v_smem
      [Shape::kStages * fa::AttnVBlock<Target, Shape>::kElems +
       fa::AttnQOperand<Target, Shape>::kSmemElems];
  static_assert(
      sizeof(k_smem) + sizeof(v_smem) <= fa::kMetalMaxThreadgroupBytes,
      "threadgroup arrays over Metal's threadgroup memory");
  static_assert(
      sizeof(k_smem) + sizeof(v_smem) ==
          fa::attention_smem_bytes(tiles, D, DV, dtype, kMetal),
      "attention_smem_bytes disagrees with the threadgroup arrays");

  fa::AttnFeatures features;
#define FA_READ_FUNCTION_CONSTANT(name, index) features.name = fc_##name;
  FA_ATTENTION_FEATURES(FA_READ_FUNCTION_CONSTANT)
#undef FA_READ_FUNCTION_CONSTANT
  // Unbound without split keys: read only with them.
  const int splits = features.split_keys ? *n_splits : 1;
  const fa::AttnArrays<T> arrays = {
      q, k, v, out, mask, sinks, lse, mask_blocks, o_part, stats, nullptr};
  const fa::AttnSmem<T> smem = {k_smem, v_smem};
  typedef fa::AttnParts<Target, Shape> Parts;
  fa::attention_body<typename Parts::Epilogue>(
      Parts::mainloop(arrays, smem), arrays, params, features,
      fa::attention_static_scheduler(
          int(tgid.x), int(tgid.y), int(tgid.z), splits),
      warp, lane);
}

// Names must match attention_kernel_name() in
// mlx_fused_attn/kernels/attention_kernel_name.h (a test compares them).
// QS: Q in threadgroup memory (the _qs kernels).
#define FA_ATTENTION_KERNEL(T, D, DV, BQ, BK, WM, QS) \
  decltype(fa_attention<T, D, DV, BQ, BK, WM, QS>)    \
      fa_attention<T, D, DV, BQ, BK, WM, QS>
// Each instantiating macro spells its host_name out: cmake/flatten_source.py
// reads the names off it for the one-kernel JIT texts.
#define FA_INSTANTIATE(tname, T, D, DV, BQ, BK, WM)                     \
  template [[host_name(                                                 \
      "fa_attention_" #tname "_d" #D "_dv" #DV "_bq" #BQ "_bk" #BK      \
      "_wm" #WM)]] [[kernel]] FA_ATTENTION_KERNEL(T, D, DV, BQ, BK, WM, 0);
#define FA_INSTANTIATE_QS(tname, T, D, DV, BQ, BK, WM)                  \
  template [[host_name(                                                 \
      "fa_attention_" #tname "_d" #D "_dv" #DV "_bq" #BQ "_bk" #BK      \
      "_wm" #WM "_qs")]] [[kernel]] FA_ATTENTION_KERNEL(T, D, DV, BQ, BK, WM, 1);

// One kernel per dtype and pair of head dims of FA_ATTENTION_HEAD_DIMS
// (attention_config.h), with the Metal tiles choose_attention_tiles gives;
// then the tile variants of MetalAttnVariant (FA_INSTANTIATE_QS: Q in
// threadgroup memory).
// BEGIN INSTANCES (tools/gen_instances.py; do not edit)
FA_INSTANTIATE(float16, half, 32, 32, 32, 32, 4)
FA_INSTANTIATE(float16, half, 64, 64, 32, 32, 4)
FA_INSTANTIATE(float16, half, 72, 72, 32, 32, 4)
FA_INSTANTIATE(float16, half, 80, 80, 32, 32, 4)
FA_INSTANTIATE(float16, half, 96, 96, 32, 32, 4)
FA_INSTANTIATE(float16, half, 128, 128, 32, 16, 4)
FA_INSTANTIATE(float16, half, 128, 128, 32, 32, 4)
FA_INSTANTIATE_QS(float16, half, 128, 128, 32, 16, 4)
FA_INSTANTIATE_QS(float16, half, 128, 128, 32, 32, 4)
FA_INSTANTIATE(float16, half, 192, 128, 32, 16, 4)
FA_INSTANTIATE(float16, half, 192, 192, 32, 16, 4)
FA_INSTANTIATE(float16, half, 256, 256, 32, 16, 4)
FA_INSTANTIATE(bfloat16, bfloat, 32, 32, 32, 32, 4)
FA_INSTANTIATE(bfloat16, bfloat, 64, 64, 32, 32, 4)
FA_INSTANTIATE(bfloat16, bfloat, 72, 72, 32, 32, 4)
FA_INSTANTIATE(bfloat16, bfloat, 80, 80, 32, 32, 4)
FA_INSTANTIATE(bfloat16, bfloat, 96, 96, 32, 32, 4)
FA_INSTANTIATE(bfloat16, bfloat, 128, 128, 32, 16, 4)
FA_INSTANTIATE(bfloat16, bfloat, 128, 128, 32, 32, 4)
FA_INSTANTIATE_QS(bfloat16, bfloat, 128, 128, 32, 16, 4)
FA_INSTANTIATE_QS(bfloat16, bfloat, 128, 128, 32, 32, 4)
FA_INSTANTIATE(bfloat16, bfloat, 192, 128, 32, 16, 4)
FA_INSTANTIATE(bfloat16, bfloat, 192, 192, 32, 16, 4)
FA_INSTANTIATE(bfloat16, bfloat, 256, 256, 32, 16, 4)
FA_INSTANTIATE(float32, float, 32, 32, 32, 32, 4)
FA_INSTANTIATE(float32, float, 64, 64, 32, 32, 4)
FA_INSTANTIATE(float32, float, 72, 72, 32, 32, 4)
FA_INSTANTIATE(float32, float, 80, 80, 32, 32, 4)
FA_INSTANTIATE(float32, float, 96, 96, 32, 32, 4)
FA_INSTANTIATE(float32, float, 128, 128, 32, 16, 4)
FA_INSTANTIATE(float32, float, 192, 128, 32, 16, 4)
FA_INSTANTIATE(float32, float, 192, 192, 32, 16, 4)
FA_INSTANTIATE(float32, float, 256, 256, 32, 8, 4)
// END INSTANCES

template <typename T>
[[kernel]] void fa_split_combine(
    device T* out [[buffer(3)]],
    constant fa::AttnParams& params [[buffer(4)]],
    const device float* o_part [[buffer(7)]],
    const device float* stats [[buffer(8)]],
    constant int& n_splits [[buffer(9)]],
    uint3 gid [[thread_position_in_grid]]) {
  fa::split_combine_element(
      o_part, stats, out, params, n_splits, gid.x, gid.y, gid.z);
}

// Names must match split_combine_kernel_name() in
// mlx_fused_attn/kernels/attention_kernel_name.h.
#define FA_INSTANTIATE_COMBINE(tname, T)                          \
  template [[host_name("fa_split_combine_" #tname)]] [[kernel]] \
  decltype(fa_split_combine<T>) fa_split_combine<T>;

FA_INSTANTIATE_COMBINE(float16, half)
FA_INSTANTIATE_COMBINE(bfloat16, bfloat)
FA_INSTANTIATE_COMBINE(float32, float)
