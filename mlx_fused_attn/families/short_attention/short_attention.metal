// Metal entry point of the short-sequence attention kernel (L_q, L_k <= 64)
// and its instantiation list. The body is
// mlx_fused_attn/families/short_attention/short_attention.h; this file binds buffers,
// declares the threadgroup memory and the function constants, and names one
// kernel per (dtype, head dim, sequence capacity) with the tiles
// choose_short_attention_tiles picks, wherever one sequence fits in a
// threadgroup's 32 KB (short_attention_instantiated).
//
// Buffers: 0 q, 1 k, 2 v, 3 out, 4 params, 5 mask (has_mask; bool or T as
// bool_mask says), 6 sinks (has_sinks). Grid: (ceil(B * H_q / problems), 1,
// 1); threadgroup: (32, warps, 1).

#include "mlx_fused_attn/families/short_attention/short_attention.h"
#include "mlx_fused_attn/families/short_attention/short_attention_config.h"
#include "mlx_fused_attn/families/short_attention/short_attention_features.h"
#include "mlx_fused_attn/tile/dtype_of.h"
#include "mlx_fused_attn/tile/metal_target.h"

using namespace metal;

#define FA_DECLARE_SHORT_FUNCTION_CONSTANT(name, index) \
  constant bool fc_short_##name [[function_constant(index)]];
FA_SHORT_ATTENTION_FEATURES(FA_DECLARE_SHORT_FUNCTION_CONSTANT)
#undef FA_DECLARE_SHORT_FUNCTION_CONSTANT

template <typename T, int D, int SEQ, int WR, int WM, int NP>
[[kernel, max_total_threads_per_threadgroup(WM* fa::kSimdWidth)]] void
fa_short_attention(
    const device T* q [[buffer(0)]],
    const device T* k [[buffer(1)]],
    const device T* v [[buffer(2)]],
    device T* out [[buffer(3)]],
    constant fa::AttnParams& params [[buffer(4)]],
    const device uchar* mask
    [[buffer(5), function_constant(fc_short_has_mask)]],
    const device T* sinks [[buffer(6), function_constant(fc_short_has_sinks)]],
    uint3 tgid [[threadgroup_position_in_grid]],
    uint warp [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]]) {
  constexpr fa::ShortAttnTiles tiles = {SEQ, WR, WM, NP};
  constexpr fa::DType dtype = fa::DTypeOf<T>::value;
  static_assert(
      tiles ==
              fa::choose_short_attention_tiles(
                  D, dtype, fa::Backend::Metal, SEQ) &&
          fa::short_attention_instantiated(D, dtype, fa::Backend::Metal, SEQ),
      "instantiation list disagrees with choose_short_attention_tiles");
  typedef fa::ShortShape<T, D, SEQ, WR, WM, NP> Shape;

  FA_SHARED_ARRAY_DECL T smem[Shape::kSmemElems];
  static_assert(
      sizeof(smem) <= fa::kMetalMaxThreadgroupBytes,
      "threadgroup arrays over Metal's threadgroup memory");

  fa::ShortAttnFeatures features;
#define FA_READ_SHORT_FUNCTION_CONSTANT(name, index) \
  features.name = fc_short_##name;
  FA_SHORT_ATTENTION_FEATURES(FA_READ_SHORT_FUNCTION_CONSTANT)
#undef FA_READ_SHORT_FUNCTION_CONSTANT

  const fa::AttnArrays<T> arrays = {
      q, k, v, out, mask, sinks, nullptr, nullptr, nullptr, nullptr, nullptr};
  fa::short_attention_block<fa::MetalTarget, Shape>(
      arrays, params, smem, features, tgid.x, warp, lane);
}

// Names must match short_attention_kernel_name() in
// mlx_fused_attn/families/short_attention/short_attention_kernel_name.h (a test compares them).
#define FA_SHORT_INSTANTIATE(tname, T, D, SEQ, WR, WM, NP)          \
  template [[host_name(                                             \
      "fa_short_attention_" #tname "_d" #D "_s" #SEQ "_wr" #WR "_wm" #WM \
      "_np" #NP)]] [[kernel]]                                       \
  decltype(fa_short_attention<T, D, SEQ, WR, WM, NP>)               \
      fa_short_attention<T, D, SEQ, WR, WM, NP>;

// One kernel per dtype, head dim and capacity where one sequence fits in
// 32 KB (short_attention_instantiated), with the tiles
// choose_short_attention_tiles gives; the others run the general kernel.
// BEGIN INSTANCES (tools/gen_instances.py; do not edit)
FA_SHORT_INSTANTIATE(float16, half, 32, 16, 8, 4, 8)
FA_SHORT_INSTANTIATE(float16, half, 32, 32, 8, 4, 4)
FA_SHORT_INSTANTIATE(float16, half, 32, 48, 8, 4, 2)
FA_SHORT_INSTANTIATE(float16, half, 32, 64, 8, 4, 2)
FA_SHORT_INSTANTIATE(float16, half, 64, 16, 8, 4, 4)
FA_SHORT_INSTANTIATE(float16, half, 64, 32, 8, 4, 2)
FA_SHORT_INSTANTIATE(float16, half, 64, 48, 8, 4, 1)
FA_SHORT_INSTANTIATE(float16, half, 64, 64, 8, 4, 1)
FA_SHORT_INSTANTIATE(float16, half, 128, 16, 8, 4, 2)
FA_SHORT_INSTANTIATE(float16, half, 128, 32, 8, 4, 1)
FA_SHORT_INSTANTIATE(bfloat16, bfloat, 32, 16, 8, 4, 8)
FA_SHORT_INSTANTIATE(bfloat16, bfloat, 32, 32, 8, 4, 4)
FA_SHORT_INSTANTIATE(bfloat16, bfloat, 32, 48, 8, 4, 2)
FA_SHORT_INSTANTIATE(bfloat16, bfloat, 32, 64, 8, 4, 2)
FA_SHORT_INSTANTIATE(bfloat16, bfloat, 64, 16, 8, 4, 4)
FA_SHORT_INSTANTIATE(bfloat16, bfloat, 64, 32, 8, 4, 2)
FA_SHORT_INSTANTIATE(bfloat16, bfloat, 64, 48, 8, 4, 1)
FA_SHORT_INSTANTIATE(bfloat16, bfloat, 64, 64, 8, 4, 1)
FA_SHORT_INSTANTIATE(bfloat16, bfloat, 128, 16, 8, 4, 2)
FA_SHORT_INSTANTIATE(bfloat16, bfloat, 128, 32, 8, 4, 1)
FA_SHORT_INSTANTIATE(float32, float, 32, 16, 8, 4, 4)
FA_SHORT_INSTANTIATE(float32, float, 32, 32, 8, 4, 2)
FA_SHORT_INSTANTIATE(float32, float, 32, 48, 8, 4, 1)
FA_SHORT_INSTANTIATE(float32, float, 32, 64, 8, 4, 1)
FA_SHORT_INSTANTIATE(float32, float, 64, 16, 8, 4, 2)
FA_SHORT_INSTANTIATE(float32, float, 64, 32, 8, 4, 1)
FA_SHORT_INSTANTIATE(float32, float, 128, 16, 8, 4, 1)
// END INSTANCES
