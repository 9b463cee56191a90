// The quantized-K/V half of the GPU interface (backend/gpu_quantized.h) on
// Metal: the pipelines of a plan built, and its dispatch through MLX's
// Metal device and command encoder, binding buffers as
// quantized_attention.metal lists them. Its split keys merge in the
// family's own combine.
#include <optional>

#include "mlx/allocator.h"
#include "mlx/backend/metal/device.h"
#include "mlx_fused_attn/backend/gpu_quantized.h"
#include "mlx_fused_attn/backend/metal/attention_step_pipeline.h"
#include "mlx_fused_attn/backend/metal/kernel_library.h"
#include "mlx_fused_attn/backend/metal/split_partials.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_kernel_name.h"
#include "mlx_fused_attn/families/strided_copy/metal/strided_copy_metal.h"
#include "mlx_fused_attn/plan/quantized_launch_params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

constexpr const char* kOp = "[quantized_scaled_dot_product_attention] Metal: ";

MetalPipeline quantized_pipeline(const QuantizedAttentionPlan& plan) {
  const auto& tiles = std::get<fa::AttnTiles>(plan.tiles);
  return attention_step_pipeline(
      KernelFamily::QuantizedAttention,
      fa::quantized_attention_kernel_name(
          plan.dtype, plan.params.D, plan.spec.kv.bits, tiles),
      plan.features, tiles.warps);
}

/// The family's combine of split keys, in its own library.
MetalPipeline quantized_combine_pipeline(fa::DType dtype) {
  return split_combine_pipeline(
      KernelFamily::QuantizedAttention,
      fa::quantized_split_combine_kernel_name(dtype));
}

/// `words` with contiguous rows, as the loader reads them: the array, or a
/// row-contiguous copy for a view whose last axis steps (mlx-lm's cache
/// slices only the key axis). The copy moves 4-byte elements unchanged,
/// so it runs as float32's.
mx::array words_with_contiguous_rows(
    const mx::array& words,
    mx::metal::Device& d,
    mx::metal::CommandEncoder& enc) {
  if (words.strides()[3] == 1 || words.shape(3) == 1) {
    return words;
  }
  return row_contiguous_copy(words, fa::DType::Float32, d, enc);
}

} // namespace

Support quantized_prepare(const QuantizedAttentionPlan& plan, mx::Stream s) {
  auto& d = mx::metal::device(s.device);
  // Strided q, sinks and words are copied first, and whether they are is
  // known only at eval.
  for (fa::DType t : {plan.dtype, fa::DType::Float32}) {
    if (Support ready = pipeline_ready(d, strided_copy_pipeline(t));
        !ready.ok) {
      return named(kOp, ready);
    }
  }
  if (plan.key_splits > 1) {
    if (Support ready =
            pipeline_ready(d, quantized_combine_pipeline(plan.dtype));
        !ready.ok) {
      return named(kOp, ready);
    }
  }
  return named(kOp, pipeline_ready(d, quantized_pipeline(plan)));
}

void quantized_run(
    const QuantizedAttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    mx::Stream s) {
  mx::array& out = outputs[0];
  auto& d = mx::metal::device(s.device);
  auto& enc = mx::metal::get_command_encoder(s);
  const int mi = quantized_mask_index(plan.spec);
  const int si = quantized_sinks_index(plan.spec);
  std::vector<mx::array> in = inputs;
  in[kQuantQ] = with_contiguous_rows(inputs[kQuantQ], plan.dtype, d, enc);
  in[kQuantKWords] = words_with_contiguous_rows(inputs[kQuantKWords], d, enc);
  in[kQuantVWords] = words_with_contiguous_rows(inputs[kQuantVWords], d, enc);
  if (si >= 0) {
    in[si] = with_contiguous_rows(inputs[si], plan.dtype, d, enc);
  }
  out.set_data(mx::allocator::malloc(out.nbytes()));
  const fa::AttnParams params = quantized_attention_params(plan, in, out);
  const fa::QuantKvParams qparams = quantized_kv_params(plan, in);

  enc.set_compute_pipeline_state(get_pipeline(d, quantized_pipeline(plan)));
  enc.set_input_array(in[kQuantQ], 0);
  enc.set_input_array(in[kQuantKWords], 1);
  enc.set_input_array(in[kQuantVWords], 2);
  enc.set_output_array(out, 3);
  enc.set_bytes(params, 4);
  if (mi >= 0) {
    enc.set_input_array(in[mi], 5);
  }
  if (si >= 0) {
    enc.set_input_array(in[si], 6);
  }
  std::optional<SplitPartials> parts;
  if (plan.key_splits > 1) {
    parts = bind_split_partials(params, plan.key_splits, enc);
  }
  enc.set_input_array(in[kQuantKScales], 12);
  enc.set_input_array(in[kQuantKBiases], 13);
  enc.set_input_array(in[kQuantVScales], 14);
  enc.set_input_array(in[kQuantVBiases], 15);
  enc.set_bytes(qparams, 16);
  enc.dispatch_threadgroups(
      MTL::Size(plan.grid.x, plan.grid.y, plan.grid.z),
      MTL::Size(fa::kSimdWidth, plan.grid.warps, 1));
  if (parts) {
    combine_splits(
        quantized_combine_pipeline(plan.dtype), params, plan.key_splits,
        *parts, out, d, enc);
  }
}

} // namespace mlx_fused_attn::gpu
