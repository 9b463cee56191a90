// Metal entry point of the quantized-KV attention family and its
// instantiation list. The body is quantized_attention.h (the float kernels'
// body over a dequantizing K/V policy); this file binds buffers, declares
// the threadgroup memory and the function constants, and names one kernel
// per (dtype, head dim, bits) with the tiles
// choose_quantized_attention_tiles picks. The group size is a parameter
// (fa::QuantKvParams).
//
// Buffers as families/attention/attention.metal's where they mean the
// same: 0 q, 1 K's words, 2 V's words, 3 out, 4 params, 5 mask (has_mask),
// 6 sinks (has_sinks), 7 partial outputs, 8 their row statistics and 9 the
// split count (split_keys), 11 the mask's classes by block (mask_blocks);
// then 12 K's scales, 13 K's biases, 14 V's scales, 15 V's biases, 16 the
// quantization's parameters (fa::QuantKvParams). No row LSE (has_lse is
// never set: there is no backward). Grid: (query blocks * splits, H_q, B);
// threadgroup: (32, warps, 1).
//
// The combine of split keys, fa_quantized_split_combine_<dtype>, binds 3
// out, 4 params, 7 partial outputs, 8 their row statistics, 9 the split
// count (attention.metal's fa_split_combine, in this family's library).

#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_config.h"
#include "mlx_fused_attn/kernels/split_keys.h"
#include "mlx_fused_attn/quantized_kv_params.h"
#include "mlx_fused_attn/tile/dtype_of.h"
#include "mlx_fused_attn/tile/metal_target.h"
#include "mlx_fused_attn/tile/quantized_kv_target.h"

using namespace metal;

#define FA_DECLARE_FUNCTION_CONSTANT(name, index) \
  constant bool fc_##name [[function_constant(index)]];
FA_ATTENTION_FEATURES(FA_DECLARE_FUNCTION_CONSTANT)
#undef FA_DECLARE_FUNCTION_CONSTANT

template <typename T, int D, int BITS, int BQ, int BK, int WM>
[[kernel, max_total_threads_per_threadgroup(WM* fa::kSimdWidth)]] void
fa_quantized_attention(
    const device T* q [[buffer(0)]],
    const device uint* k_words [[buffer(1)]],
    const device uint* v_words [[buffer(2)]],
    device T* out [[buffer(3)]],
    constant fa::AttnParams& params [[buffer(4)]],
    const device uchar* mask [[buffer(5), function_constant(fc_has_mask)]],
    const device T* sinks [[buffer(6), function_constant(fc_has_sinks)]],
    device float* o_part [[buffer(7), function_constant(fc_split_keys)]],
    device float* stats [[buffer(8), function_constant(fc_split_keys)]],
    constant int* n_splits [[buffer(9), function_constant(fc_split_keys)]],
    const device uint* mask_blocks
    [[buffer(11), function_constant(fc_mask_blocks)]],
    const device T* k_scales [[buffer(12)]],
    const device T* k_biases [[buffer(13)]],
    const device T* v_scales [[buffer(14)]],
    const device T* v_biases [[buffer(15)]],
    constant fa::QuantKvParams& qparams [[buffer(16)]],
    uint3 tgid [[threadgroup_position_in_grid]],
    uint warp [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]]) {
  constexpr fa::AttnTiles tiles = {BQ, BK, WM};
  constexpr fa::DType dtype = fa::DTypeOf<T>::value;
  constexpr fa::Backend kMetal = fa::Backend::Metal;
  static_assert(
      tiles == fa::choose_quantized_attention_tiles(D, dtype, kMetal),
      "instantiation list disagrees with choose_quantized_attention_tiles");
  typedef fa::QuantizedKVTarget<fa::MetalTarget, BITS> Target;
  typedef fa::AttnShape<T, D, BQ, BK, WM> Shape;

  FA_SHARED_ARRAY_DECL T k_smem[fa::AttnKBlock<Target, Shape>::kElems];
  FA_SHARED_ARRAY_DECL T v_smem[fa::AttnVBlock<Target, Shape>::kElems];
  static_assert(
      sizeof(k_smem) + sizeof(v_smem) ==
          fa::attention_smem_bytes(tiles, D, D, dtype, kMetal),
      "attention_smem_bytes disagrees with the threadgroup arrays");
  static_assert(
      sizeof(k_smem) + sizeof(v_smem) <= fa::kMetalMaxThreadgroupBytes,
      "threadgroup arrays over Metal's threadgroup memory");

  fa::AttnFeatures features;
#define FA_READ_FUNCTION_CONSTANT(name, index) features.name = fc_##name;
  FA_ATTENTION_FEATURES(FA_READ_FUNCTION_CONSTANT)
#undef FA_READ_FUNCTION_CONSTANT
  // Unbound without split keys: read only with them.
  const int splits = features.split_keys ? *n_splits : 1;
  // K and V are read through the mainloop's policy alone; there is no LSE
  // (no backward).
  const fa::AttnArrays<T> arrays = {
      q, nullptr, nullptr, out, mask, sinks, nullptr, mask_blocks, o_part,
      stats, nullptr};
  const fa::QuantKVArrays<T> kv = {
      k_words, k_scales, k_biases, v_words, v_scales, v_biases};
  const fa::AttnSmem<T> smem = {k_smem, v_smem};
  typedef fa::QuantAttnParts<Target, Shape> Parts;
  fa::attention_body<typename Parts::Epilogue>(
      Parts::mainloop(kv, qparams, smem), arrays, params, features,
      fa::attention_static_scheduler(
          int(tgid.x), int(tgid.y), int(tgid.z), splits),
      warp, lane);
}

// Names must match quantized_attention_kernel_name() in
// quantized_attention_kernel_name.h (a test compares them). Each
// instantiating macro spells its host_name out:
// cmake/flatten_source.py reads the names off it for the one-kernel JIT
// texts.
#define FA_QUANTIZED_INSTANTIATE(tname, T, D, BITS, BQ, BK, WM)            \
  template [[host_name(                                                    \
      "fa_quantized_attention_" #tname "_d" #D "_b" #BITS "_bq" #BQ    \
      "_bk" #BK "_wm" #WM)]] [[kernel]]                                    \
  decltype(fa_quantized_attention<T, D, BITS, BQ, BK, WM>)                 \
      fa_quantized_attention<T, D, BITS, BQ, BK, WM>;

// One kernel per dtype, head dim of FA_QUANTIZED_ATTENTION_HEAD_DIMS and
// bits of FA_QUANTIZED_ATTENTION_BITS (quantized_attention_config.h), with
// the Metal tiles choose_quantized_attention_tiles gives.
// BEGIN INSTANCES (tools/gen_instances.py; do not edit)
FA_QUANTIZED_INSTANTIATE(float16, half, 32, 4, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 32, 8, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 64, 4, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 64, 8, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 96, 4, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 96, 8, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 128, 4, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 128, 8, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 192, 4, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 192, 8, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 256, 4, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(float16, half, 256, 8, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 32, 4, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 32, 8, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 64, 4, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 64, 8, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 96, 4, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 96, 8, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 128, 4, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 128, 8, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 192, 4, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 192, 8, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 256, 4, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(bfloat16, bfloat, 256, 8, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 32, 4, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 32, 8, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 64, 4, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 64, 8, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 96, 4, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 96, 8, 32, 32, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 128, 4, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 128, 8, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 192, 4, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 192, 8, 32, 16, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 256, 4, 32, 8, 4)
FA_QUANTIZED_INSTANTIATE(float32, float, 256, 8, 32, 8, 4)
// END INSTANCES

template <typename T>
[[kernel]] void fa_quantized_split_combine(
    device T* out [[buffer(3)]],
    constant fa::AttnParams& params [[buffer(4)]],
    const device float* o_part [[buffer(7)]],
    const device float* stats [[buffer(8)]],
    constant int& n_splits [[buffer(9)]],
    uint3 gid [[thread_position_in_grid]]) {
  fa::split_combine_element(
      o_part, stats, out, params, n_splits, gid.x, gid.y, gid.z);
}

// Names must match quantized_split_combine_kernel_name().
#define FA_QUANTIZED_INSTANTIATE_COMBINE(tname, T)                          \
  template [[host_name("fa_quantized_split_combine_" #tname)]] [[kernel]] \
  decltype(fa_quantized_split_combine<T>) fa_quantized_split_combine<T>;

FA_QUANTIZED_INSTANTIATE_COMBINE(float16, half)
FA_QUANTIZED_INSTANTIATE_COMBINE(bfloat16, bfloat)
FA_QUANTIZED_INSTANTIATE_COMBINE(float32, float)
