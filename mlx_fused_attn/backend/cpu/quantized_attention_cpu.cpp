#include "mlx_fused_attn/backend/cpu/quantized_attention_cpu.h"

#include "mlx_fused_attn/backend/cpu/dispatch.h"
#include "mlx_fused_attn/backend/cpu/quantized_problem.h"
#include "mlx_fused_attn/plan/quantized_launch_params.h"

namespace mlx_fused_attn::cpu {

using namespace mlx::core;

namespace {

/// The codes `words` with contiguous rows: the array's own data where its
/// last axis is, else a row-major copy in `copy` (mlx-lm's cache slices
/// only the key axis, so this is for views the caller transposed).
const uint32_t* contiguous_rows(
    const array& words,
    fa::stride_t* strides,
    std::vector<uint32_t>& copy) {
  if (words.strides()[3] == 1 || words.shape(3) == 1) {
    return words.data<uint32_t>();
  }
  const auto& sh = words.shape();
  const auto& st = words.strides();
  copy.resize(words.size());
  const uint32_t* src = words.data<uint32_t>();
  size_t i = 0;
  for (int b = 0; b < sh[0]; ++b) {
    for (int h = 0; h < sh[1]; ++h) {
      for (int k = 0; k < sh[2]; ++k) {
        for (int w = 0; w < sh[3]; ++w) {
          copy[i++] = src[b * st[0] + h * st[1] + k * st[2] + w * st[3]];
        }
      }
    }
  }
  strides[0] = int64_t(sh[1]) * sh[2] * sh[3];
  strides[1] = int64_t(sh[2]) * sh[3];
  strides[2] = sh[3];
  return copy.data();
}

} // namespace

void quantized_run(
    const QuantizedAttentionPlan& plan,
    const std::vector<array>& inputs,
    std::vector<array>& outputs,
    Stream s) {
  const int mi = quantized_mask_index(plan.spec);
  const int si = quantized_sinks_index(plan.spec);
  dispatch(
      s, inputs, outputs,
      [plan, mi, si](const std::vector<array>& in, std::vector<array>& out) {
        QuantProblem qp{};
        Problem& pr = qp.attn;
        pr.p = quantized_attention_params(plan, in, out[0]);
        pr.q_dstride = in[kQuantQ].strides()[3];
        pr.dtype = plan.dtype;
        // Packed decode rows see every key: the planner dropped the causal
        // mask from their features.
        const MaskKind mask = plan.spec.attention.mask;
        pr.mask = mask == MaskKind::Causal && !plan.features.causal
            ? MaskKind::None
            : mask;
        pr.q = in[kQuantQ].data<void>();
        pr.mask_data = mi >= 0 ? in[mi].data<void>() : nullptr;
        pr.sinks = si >= 0 ? in[si].data<void>() : nullptr;
        pr.out = out[0].data<void>();
        qp.kv = quantized_kv_params(plan, in);
        std::vector<uint32_t> k_copy, v_copy;
        qp.k_words =
            contiguous_rows(in[kQuantKWords], qp.kv.k.word_strides, k_copy);
        qp.v_words =
            contiguous_rows(in[kQuantVWords], qp.kv.v.word_strides, v_copy);
        qp.k_scales = in[kQuantKScales].data<void>();
        qp.k_biases = in[kQuantKBiases].data<void>();
        qp.v_scales = in[kQuantVScales].data<void>();
        qp.v_biases = in[kQuantVBiases].data<void>();
        qp.packed_gqa = plan.packed_gqa;
        run_best(qp);
      });
}

} // namespace mlx_fused_attn::cpu
