// The attention kernel body (mlx_fused_attn/kernels/attention.h) in the
// variants that only CUDA builds, run through the Metal target so that the
// emulator checks their indexing and barriers without a GPU:
//
// - head dims that are not whole fragments (CUDA's D = 72 in k16 steps):
//   here float32 D = 20 and D_v = 12 in 8-wide fragments, padded to 24 and
//   16 with zero columns in Q, K and V, and only the real columns stored;
// - Q in threadgroup memory read a k step at a time (q_in_padded_shared.h,
//   CUDA's fp32 at D >= 192; on Metal a variant with one stage,
//   mlx_fused_attn/families/attention/attention.metal), with a ring of two K/V stages.
//
// Buffers, function constants and grid as mlx_fused_attn/families/attention/attention.metal; names as
// attention_kernel_name() gives them ("_qs": Q in threadgroup memory).
#include "mlx_fused_attn/kernels/attention.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/tile/metal_target.h"

using namespace metal;

#define FA_DECLARE_FUNCTION_CONSTANT(name, index) \
  constant bool fc_##name [[function_constant(index)]];
FA_ATTENTION_FEATURES(FA_DECLARE_FUNCTION_CONSTANT)
#undef FA_DECLARE_FUNCTION_CONSTANT

template <typename Target, typename T, int D, int DV, int BQ, int BK, int ST>
[[kernel]] void attention_variant(
    const device T* q [[buffer(0)]],
    const device T* k [[buffer(1)]],
    const device T* v [[buffer(2)]],
    device T* out [[buffer(3)]],
    constant fa::AttnParams& params [[buffer(4)]],
    const device uchar* mask [[buffer(5), function_constant(fc_has_mask)]],
    const device T* sinks [[buffer(6), function_constant(fc_has_sinks)]],
    device float* lse [[buffer(10), function_constant(fc_has_lse)]],
    const device uint* mask_blocks
    [[buffer(11), function_constant(fc_mask_blocks)]],
    uint3 tgid [[threadgroup_position_in_grid]],
    uint warp [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]]) {
  typedef fa::AttnShape<T, D, BQ, BK, 4, ST, DV> Shape;
  FA_SHARED_ARRAY_DECL T
      k_smem[ST * fa::AttnKBlock<Target, Shape>::kElems];
  // V's stages, then Q where it is kept there.
  FA_SHARED_ARRAY_DECL T v_smem
      [ST * fa::AttnVBlock<Target, Shape>::kElems +
       fa::AttnQOperand<Target, Shape>::kSmemElems];

  fa::AttnFeatures features;
#define FA_READ_FUNCTION_CONSTANT(name, index) features.name = fc_##name;
  FA_ATTENTION_FEATURES(FA_READ_FUNCTION_CONSTANT)
#undef FA_READ_FUNCTION_CONSTANT

  const fa::AttnArrays<T> arrays = {
      q, k, v, out, mask, sinks, lse, mask_blocks, nullptr, nullptr, nullptr};
  const fa::AttnSmem<T> smem = {k_smem, v_smem};
  typedef fa::AttnParts<Target, Shape> Parts;
  fa::attention_body<typename Parts::Epilogue>(
      Parts::mainloop(arrays, smem), arrays, params, features,
      fa::attention_static_scheduler(int(tgid.x), int(tgid.y), int(tgid.z), 1),
      warp, lane);
}

#define FA_VARIANT(Target, suffix, tname, T, D, DV, BQ, BK, ST)            \
  template [[host_name(                                                   \
      "fa_attention_" #tname "_d" #D "_dv" #DV "_bq" #BQ "_bk" #BK        \
      "_wm4" suffix)]] [[kernel]]                                         \
  decltype(attention_variant<Target, T, D, DV, BQ, BK, ST>)               \
      attention_variant<Target, T, D, DV, BQ, BK, ST>;

FA_VARIANT(fa::MetalTarget, "", float32, float, 20, 12, 32, 16, 1)
FA_VARIANT(fa::MetalTarget, "", float32, float, 20, 20, 32, 16, 1)
FA_VARIANT(fa::MetalQThreadgroupTarget, "_qs", float32, float, 20, 12, 32, 16, 2)
FA_VARIANT(fa::MetalQThreadgroupTarget, "_qs", float16, half, 64, 64, 32, 16, 2)
FA_VARIANT(fa::MetalQThreadgroupTarget, "_qs", bfloat16, bfloat, 192, 128, 32, 16, 2)
