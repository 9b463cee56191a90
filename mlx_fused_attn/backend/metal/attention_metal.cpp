// The GPU interface (backend/gpu.h) on Metal: what the fused kernel covers,
// and its dispatch through MLX's Metal device and command encoder.
//
// Kernels come from their family's library (kernel_library.h). supports()
// builds the pipeline a call will use and checks it against the dispatch,
// so that a kernel that cannot run makes the call fall back before its
// graph exists; MLX's Device caches the libraries and pipelines for eval.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/metal/device.h"
#include "mlx/utils.h"
#include "mlx_fused_attn/backend/attention_covers.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/backend/metal/short_attention_metal.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/attention_kernel_name.h"
#include "mlx_fused_attn/kernels/short_attention_names.h"
#include "mlx_fused_attn/kernels/strided_copy_params.h"
#include "mlx_fused_attn/params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

constexpr const char* kOp = "[scaled_dot_product_attention] Metal: ";

/// Threads a threadgroup of the strided copy (at most).
constexpr size_t kCopyThreads = 256;

MetalPipeline strided_copy_pipeline(fa::DType dtype) {
  MetalPipeline p;
  p.family = KernelFamily::Copy;
  p.kernel_name = std::string("fa_strided_copy_") + fa::dtype_name(dtype);
  p.hash_name = p.kernel_name;
  p.threads = kCopyThreads;
  return p;
}

/// `x` with a unit stride along its last axis: `x` itself, or a contiguous
/// copy made on the GPU (kept alive until the command buffer completes).
/// Encodes its own dispatch, so it runs before the attention kernel is set.
mx::array with_contiguous_rows(
    const mx::array& x,
    fa::DType dtype,
    mx::metal::Device& d,
    mx::metal::CommandEncoder& enc) {
  if (x.ndim() == 0 || x.strides()[x.ndim() - 1] == 1 || x.shape(-1) == 1) {
    return x;
  }
  mx::array copy(x.shape(), x.dtype(), nullptr, {});
  copy.set_data(mx::allocator::malloc(copy.nbytes()));

  fa::StridedCopyParams params{};
  const int pad = 4 - static_cast<int>(x.ndim());
  for (int i = 0; i < 4; ++i) {
    params.shape[i] = i < pad ? 1 : x.shape(i - pad);
    params.strides[i] = i < pad ? 0 : x.strides()[i - pad];
  }

  enc.set_compute_pipeline_state(get_pipeline(d, strided_copy_pipeline(dtype)));
  enc.set_input_array(x, 0);
  enc.set_output_array(copy, 1);
  enc.set_bytes(params, 2);
  const size_t inner = size_t(params.shape[2]) * params.shape[3];
  MTL::Size grid(inner, params.shape[1], params.shape[0]);
  MTL::Size group(std::min(inner, kCopyThreads), 1, 1);
  enc.dispatch_threads(grid, group);
  enc.add_temporary(copy);
  return copy;
}

/// The general kernel's pipeline for a call.
MetalPipeline general_pipeline(
    const AttentionSpec& spec,
    fa::DType dtype,
    int L_q,
    int L_k,
    int D,
    int D_v) {
  const fa::AttnTiles tiles = fa::choose_attention_tiles(
      D, D_v, dtype, fa::Backend::Metal, spec.mask == MaskKind::Causal, false);
  fa::AttnFeatures features{};
  features.has_mask =
      spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive;
  features.bool_mask = spec.mask == MaskKind::Bool;
  features.causal = spec.mask == MaskKind::Causal;
  features.has_sinks = spec.has_sinks;
  features.align_q = L_q % tiles.bq == 0;
  features.align_k = L_k % tiles.bk == 0;

  MetalPipeline p;
  p.family = KernelFamily::Attention;
  p.kernel_name = fa::attention_kernel_name(dtype, D, D_v, tiles);
  p.hash_name = fa::attention_pipeline_name(p.kernel_name, features);
#define FA_FUNCTION_CONSTANT(name, index) \
  p.constants.push_back({index, features.name});
  FA_ATTENTION_FEATURES(FA_FUNCTION_CONSTANT)
#undef FA_FUNCTION_CONSTANT
  p.threads = size_t(fa::kSimdWidth) * tiles.warps;
  return p;
}

/// The pipeline that runs a covered call: the short kernel's or the
/// general one's.
MetalPipeline call_pipeline(
    const AttentionSpec& spec,
    const std::vector<mx::array>& inputs,
    fa::DType dtype) {
  const int D = inputs[0].shape(3);
  if (auto tiles = short_attention_tiles_metal(inputs, dtype)) {
    return short_attention_pipeline(spec, dtype, *tiles, D);
  }
  return general_pipeline(
      spec, dtype, inputs[0].shape(2), inputs[1].shape(2), D,
      inputs[2].shape(3));
}

} // namespace

Support supports(
    const AttentionSpec& spec,
    const std::vector<mx::array>& inputs) {
  fa::DType dtype;
  if (Support covered = attention_kernel_covers(kOp, inputs, &dtype);
      !covered.ok) {
    return covered;
  }
  auto& d = mx::metal::device(mx::Device::gpu);
  // Strided q, k, v and sinks are copied first (with_contiguous_rows), and
  // whether they are is known only at eval.
  if (Support copy = pipeline_ready(d, strided_copy_pipeline(dtype));
      !copy.ok) {
    return {false, kOp + copy.reason};
  }
  if (Support ready = pipeline_ready(d, call_pipeline(spec, inputs, dtype));
      !ready.ok) {
    return {false, kOp + ready.reason};
  }
  // Short sequences run the short kernel (short_attention_covers); the
  // reason names it.
  if (auto tiles = short_attention_tiles_metal(inputs, dtype)) {
    return {true, fa::short_attention_note(*tiles)};
  }
  return Support::yes();
}

void eval(
    const AttentionSpec& spec,
    const std::vector<mx::array>& inputs,
    mx::array& out,
    mx::Stream s) {
  auto& d = mx::metal::device(s.device);
  auto& enc = mx::metal::get_command_encoder(s);

  fa::DType dtype;
  if (!kernel_dtype(out.dtype(), &dtype)) {
    throw std::logic_error(
        std::string(kOp) + "internal error: eval without a supported dtype");
  }
  const bool has_mask =
      spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive;
  const mx::array q = with_contiguous_rows(inputs[0], dtype, d, enc);
  const mx::array k = with_contiguous_rows(inputs[1], dtype, d, enc);
  const mx::array v = with_contiguous_rows(inputs[2], dtype, d, enc);
  const mx::array sinks = spec.has_sinks
      ? with_contiguous_rows(inputs.back(), dtype, d, enc)
      : inputs.back();
  out.set_data(mx::allocator::malloc(out.nbytes()));

  const int B = q.shape(0);
  const int H_q = q.shape(1);
  const int H_kv = k.shape(1);
  const int L_q = q.shape(2);
  const int L_k = k.shape(2);
  const int D = q.shape(3);
  const int D_v = v.shape(3);

  fa::AttnParams params{};
  params.B = B;
  params.H_q = H_q;
  params.H_kv = H_kv;
  params.gqa_factor = H_q / H_kv;
  params.L_q = L_q;
  params.L_k = L_k;
  params.D = D;
  params.D_v = D_v;
  params.causal_offset = L_k - L_q;
  params.scale_log2 = spec.scale * 1.4426950408889634f;
  for (int i = 0; i < 3; ++i) {
    params.q_strides[i] = q.strides()[i];
    params.k_strides[i] = k.strides()[i];
    params.v_strides[i] = v.strides()[i];
    params.o_strides[i] = out.strides()[i];
  }
  if (has_mask) {
    for (int i = 0; i < 4; ++i) {
      params.mask_strides[i] = inputs[3].strides()[i];
    }
  }

  const MetalPipeline pipeline = call_pipeline(spec, inputs, dtype);
  auto* kernel = get_pipeline(d, pipeline);
  if (auto short_tiles = short_attention_tiles_metal(inputs, dtype)) {
    encode_short_attention(
        enc, kernel, spec, *short_tiles, params, inputs, q, k, v, sinks, out);
    return;
  }

  enc.set_compute_pipeline_state(kernel);
  enc.set_input_array(q, 0);
  enc.set_input_array(k, 1);
  enc.set_input_array(v, 2);
  enc.set_output_array(out, 3);
  enc.set_bytes(params, 4);
  if (has_mask) {
    enc.set_input_array(inputs[3], 5);
  }
  if (spec.has_sinks) {
    enc.set_input_array(sinks, 6);
  }

  const fa::AttnTiles tiles = fa::choose_attention_tiles(
      D, D_v, dtype, fa::Backend::Metal, spec.mask == MaskKind::Causal, false);
  const MTL::Size grid((L_q + tiles.bq - 1) / tiles.bq, H_q, B);
  const MTL::Size group(fa::kSimdWidth, tiles.warps, 1);
  enc.dispatch_threadgroups(grid, group);
}

} // namespace mlx_fused_attn::gpu
