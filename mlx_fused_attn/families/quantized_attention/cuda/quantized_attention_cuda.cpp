// The quantized-K/V half of the GPU interface (backend/gpu_quantized.h) on
// MLX's CUDA backend: the kernels of a plan built (nvcc's AOT table or
// NVRTC, kernels.h), and the plan's launch as nodes of the encoder's CUDA
// graph: quantized_attention_kernel with its one argument struct
// (quantized_attention_args.h), in the plan's chunk policy where the K/V
// words are aligned for it, then, with split keys, the family's combine,
// unless the kernel's last split merges (plan.split_merge).
#include <cstdint>
#include <vector>

#include "mlx/backend/cuda/device.h"
#include "mlx/backend/cuda/utils.h"
#include "mlx_fused_attn/families/quantized_attention/cuda/quantized_attention_kernel_key.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/cuda/launch_common.h"
#include "mlx_fused_attn/backend/cuda/split_partials.h"
#include "mlx_fused_attn/backend/gpu_quantized.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_kernel_args.h"
#include "mlx_fused_attn/plan/quantized_launch_params.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;
namespace cu = mlx::core::cu;

namespace {

constexpr const char* kOp = "[quantized_scaled_dot_product_attention] CUDA: ";

/// The plan's kernel, its chunk policy `chunks` (the plan's, or Float
/// where the words are not aligned for it: words_fit_chunks).
cuda::QuantizedAttentionKernelKey quantized_key(
    const QuantizedAttentionPlan& plan,
    fa::QuantizedChunks chunks) {
  return {
      plan.dtype,
      plan.params.D,
      plan.spec.kv.bits,
      std::get<fa::AttnTiles>(plan.tiles),
      plan.features.causal,
      plan.features.has_mask,
      chunks};
}

/// The family's combine of the plan's split keys, in its form.
cuda::QuantizedSplitCombineKernelKey combine_key(
    const QuantizedAttentionPlan& plan) {
  return {plan.dtype, plan.combine_form};
}

/// The codes as the loader reads them: unit stride along the last axis (a
/// row's words are read one after another), else a row-contiguous copy,
/// which moves 4-byte elements unchanged and so runs as float32's.
mx::array words_with_contiguous_rows(
    const mx::array& words,
    mx::Stream s,
    int device,
    int arch) {
  if (words.strides()[3] == 1 || words.shape(3) == 1) {
    return words;
  }
  return cuda::contiguous_copy(words, fa::DType::Float32, s, device, arch);
}

/// Whether `words` (rows contiguous: words_with_contiguous_rows) start
/// and step on 16-byte boundaries, as the packed policies' loads need.
bool words_aligned(const mx::array& words) {
  const int64_t strides[3] = {
      words.strides()[0], words.strides()[1], words.strides()[2]};
  const int shape[3] = {words.shape(0), words.shape(1), words.shape(2)};
  return fa::quantized_words_aligned(
      reinterpret_cast<std::uintptr_t>(mx::gpu_ptr<uint32_t>(words)),
      strides, shape);
}

/// The chunk policy that reads `in`'s K and V words: the plan's where both
/// are aligned for it, else QuantizedFloatChunks (its kernel at the plan's
/// tiles, which the instance list holds too).
fa::QuantizedChunks words_fit_chunks(
    const QuantizedAttentionPlan& plan,
    const std::vector<mx::array>& in) {
  if (fa::quantized_chunks_need_aligned_words(plan.chunks) &&
      !(words_aligned(in[kQuantKWords]) && words_aligned(in[kQuantVWords]))) {
    return fa::QuantizedChunks::Float;
  }
  return plan.chunks;
}

} // namespace

Support quantized_prepare(const QuantizedAttentionPlan& plan, mx::Stream s) {
  cu::Device& d = cu::device(s.device);
  const int device = d.cuda_device();
  const int arch = cuda::arch_of(d);
  if (Support supported = cuda::device_supported(kOp, d); !supported.ok) {
    return supported;
  }
  // q, sinks and codes may be copied first (their strides are known at
  // eval): as q's type and as float32's.
  for (fa::DType t : {plan.dtype, fa::DType::Float32}) {
    if (Support copies = cuda::copy_kernels_ready(t, device, arch);
        !copies.ok) {
      return named(kOp, copies);
    }
  }
  if (plan.key_splits > 1 && !plan.split_merge) {
    if (Support ready = cuda::kernel_ready(combine_key(plan), device, arch);
        !ready.ok) {
      return named(kOp, ready);
    }
  }
  // The plan's kernel, and where its policy needs aligned words the
  // float-chunk one that runs where they are not (known at eval).
  if (fa::quantized_chunks_need_aligned_words(plan.chunks)) {
    if (Support ready = cuda::kernel_ready(
            quantized_key(plan, fa::QuantizedChunks::Float), device, arch);
        !ready.ok) {
      return named(kOp, ready);
    }
  }
  return named(
      kOp, cuda::kernel_ready(quantized_key(plan, plan.chunks), device, arch));
}

namespace {

// The kernel reads the struct as its own T's: float's layout is every T's
// (the struct's header says why).
static_assert(
    fa::kQuantArgsMatchHost<float>,
    "QuantAttnKernelArgs<float> is laid out unlike the <void> form filled here");

/// The kernel's argument struct, its arrays' device pointers by name.
fa::QuantAttnKernelArgs<void> kernel_args(
    const QuantizedAttentionPlan& plan,
    const std::vector<mx::array>& in,
    const mx::array& out,
    const fa::AttnParams& params,
    const cuda::SplitPartials& parts) {
  const int mi = quantized_mask_index(plan.spec);
  const int si = quantized_sinks_index(plan.spec);
  fa::QuantAttnKernelArgs<void> args{};
  args.q = mx::gpu_ptr<void>(in[kQuantQ]);
  args.out = mx::gpu_ptr<void>(out);
  args.mask = mi >= 0
      ? static_cast<const unsigned char*>(mx::gpu_ptr<void>(in[mi]))
      : nullptr;
  args.sinks = si >= 0 ? mx::gpu_ptr<void>(in[si]) : nullptr;
  args.k_words = mx::gpu_ptr<uint32_t>(in[kQuantKWords]);
  args.k_scales = mx::gpu_ptr<void>(in[kQuantKScales]);
  args.k_biases = mx::gpu_ptr<void>(in[kQuantKBiases]);
  args.v_words = mx::gpu_ptr<uint32_t>(in[kQuantVWords]);
  args.v_scales = mx::gpu_ptr<void>(in[kQuantVScales]);
  args.v_biases = mx::gpu_ptr<void>(in[kQuantVBiases]);
  args.o_part = parts.o_part_ptr;
  args.stats = parts.stats_ptr;
  args.split_counters = parts.counters_ptr;
  args.params = params;
  args.qparams = quantized_kv_params(plan, in);
  args.features = plan.features;
  args.n_splits = plan.key_splits;
  return args;
}

} // namespace

void quantized_run(
    const QuantizedAttentionPlan& plan,
    const std::vector<mx::array>& inputs,
    std::vector<mx::array>& outputs,
    mx::Stream s) {
  mx::array& out = outputs[0];
  cu::Device& dev = cu::device(s.device);
  dev.make_current();
  cu::CommandEncoder& enc = cu::get_command_encoder(s);
  const int device = dev.cuda_device();
  const int arch = cuda::arch_of(dev);
  const int si = quantized_sinks_index(plan.spec);

  std::vector<mx::array> in = inputs;
  in[kQuantQ] =
      cuda::readable_rows(inputs[kQuantQ], plan.dtype, s, device, arch);
  in[kQuantKWords] =
      words_with_contiguous_rows(inputs[kQuantKWords], s, device, arch);
  in[kQuantVWords] =
      words_with_contiguous_rows(inputs[kQuantVWords], s, device, arch);
  // Sinks are read as sinks[head]: a strided view is copied.
  if (si >= 0 && inputs[si].strides()[0] != 1) {
    in[si] = cuda::contiguous_copy(inputs[si], plan.dtype, s, device, arch);
  }

  const cuda::SplitPartials parts = cuda::make_buffers(
      {&out}, plan.key_splits, cuda::merged_tiles(plan), plan.params, s, enc);
  cuda::poison(out, enc, device, arch);

  const fa::AttnParams params = quantized_attention_params(plan, in, out);
  for (const mx::array& a : in) {
    enc.set_input_array(a);
  }
  enc.set_output_array(out);
  cuda::write_partials(parts, enc);
  fa::QuantAttnKernelArgs<void> args = kernel_args(plan, in, out, params, parts);
  enc.add_kernel_node_ex(
      cuda::kernel_function(
          quantized_key(plan, words_fit_chunks(plan, in)), device, arch),
      dim3(plan.grid.x, plan.grid.y, plan.grid.z),
      dim3(plan.grid.warps * fa::kSimdWidth),
      {},
      static_cast<uint32_t>(plan.grid.smem_bytes),
      args);
  if (parts.o_part && !plan.split_merge) {
    cuda::add_combine_node(
        enc,
        cuda::kernel_function(combine_key(plan), device, arch),
        plan.combine_form, params, plan.key_splits, parts, out);
  }
}

} // namespace mlx_fused_attn::gpu
