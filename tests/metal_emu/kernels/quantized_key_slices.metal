// The quantized family's body (families/quantized_attention/
// quantized_attention.h) with key slices (AttnTiles::key_slices,
// kernels/key_slices.h), which only CUDA builds, run through the Metal
// target so that the emulator checks the slices' key loop and their merge
// without a GPU.
//
// The tiles are CUDA's, choose_quantized_sliced_tiles(): 16 rows, 64-key
// blocks, 4 warps that all hold the 16 rows and each run the products of 16
// keys of a block (here two 8-wide simdgroup fragments a side where CUDA
// has one m16 fragment row and two n8 ones), their softmaxes merged through
// the K/V stage at the end; one stage, the register-staged schedule. As the
// CUDA entry point (quantized_attention_kernel.cuh), the kernel reads no
// classes by block (buffer 11 is not bound, mask_blocks is off). Only head
// dims whose stage fits Metal's threadgroup memory (D <= 64 at 16 bits).
//
// Buffers, function constants and grid as
// families/quantized_attention/quantized_attention.metal's, names too (a
// "_ks4" suffix: four key slices), with its split combine.
#include "mlx_fused_attn/families/quantized_attention/quantized_attention.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"
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
quantized_key_slices(
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
    const device T* k_scales [[buffer(12)]],
    const device T* k_biases [[buffer(13)]],
    const device T* v_scales [[buffer(14)]],
    const device T* v_biases [[buffer(15)]],
    constant fa::QuantKvParams& qparams [[buffer(16)]],
    uint3 tgid [[threadgroup_position_in_grid]],
    uint warp [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]]) {
  constexpr fa::AttnTiles sliced = fa::choose_quantized_sliced_tiles();
  static_assert(
      BQ == sliced.bq && BK == sliced.bk && WM == sliced.warps &&
          sliced.stages == 1 && sliced.key_slices,
      "the instance's tiles are not choose_quantized_sliced_tiles()'");
  typedef fa::QuantizedKVTarget<fa::MetalTarget, BITS> Target;
  typedef fa::AttnShape<T, D, BQ, BK, WM, 1, D, WM> Shape;

  // K's stage, then V's, in one array, as CUDA's entry point lays them
  // out: the slices' merge takes both stages as one scratch
  // (AttnMainloop::merge_key_slices), and two arrays need not be adjacent.
  typedef fa::AttnKBlock<Target, Shape> KBlock;
  FA_SHARED_ARRAY_DECL T
      kv_smem[KBlock::kElems + fa::AttnVBlock<Target, Shape>::kElems];
  static_assert(
      sizeof(kv_smem) <= fa::kMetalMaxThreadgroupBytes,
      "threadgroup arrays over Metal's threadgroup memory");

  fa::AttnFeatures features;
#define FA_READ_FUNCTION_CONSTANT(name, index) features.name = fc_##name;
  FA_ATTENTION_FEATURES(FA_READ_FUNCTION_CONSTANT)
#undef FA_READ_FUNCTION_CONSTANT
  // As CUDA's entry point: no classes by block.
  features.mask_blocks = false;
  // Unbound without split keys: read only with them.
  const int splits = features.split_keys ? *n_splits : 1;
  const fa::AttnArrays<T> arrays = {
      q, nullptr, nullptr, out, mask, sinks, nullptr, nullptr, o_part,
      stats, nullptr};
  const fa::QuantKVArrays<T> kv = {
      k_words, k_scales, k_biases, v_words, v_scales, v_biases};
  const fa::AttnSmem<T> smem = {kv_smem, kv_smem + KBlock::kElems};
  typedef fa::QuantAttnParts<Target, Shape> Parts;
  fa::attention_body<typename Parts::Epilogue>(
      Parts::mainloop(kv, qparams, smem), arrays, params, features,
      fa::attention_static_scheduler(
          int(tgid.x), int(tgid.y), int(tgid.z), splits),
      warp, lane);
}

#define FA_KEY_SLICES_INSTANTIATE(tname, T, D, BITS)                       \
  template [[host_name(                                                    \
      "fa_quantized_attention_" #tname "_d" #D "_b" #BITS                  \
      "_bq16_bk64_wm4_ks4")]] [[kernel]]                                   \
  decltype(quantized_key_slices<T, D, BITS, 16, 64, 4>)                    \
      quantized_key_slices<T, D, BITS, 16, 64, 4>;

FA_KEY_SLICES_INSTANTIATE(float16, half, 64, 4)
FA_KEY_SLICES_INSTANTIATE(float16, half, 32, 8)
FA_KEY_SLICES_INSTANTIATE(bfloat16, bfloat, 64, 8)

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

#define FA_KEY_SLICES_INSTANTIATE_COMBINE(tname, T)                         \
  template [[host_name("fa_quantized_split_combine_" #tname)]] [[kernel]] \
  decltype(fa_quantized_split_combine<T>) fa_quantized_split_combine<T>;

FA_KEY_SLICES_INSTANTIATE_COMBINE(float16, half)
FA_KEY_SLICES_INSTANTIATE_COMBINE(bfloat16, bfloat)
