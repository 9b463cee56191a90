#include "mlx_fused_attn/backend/cpu/attention_cpu.h"

#include <cmath>

#include "mlx_fused_attn/backend/cpu/dispatch.h"
#include "mlx_fused_attn/backend/cpu/problem.h"
#include "mlx_fused_attn/call.h"

namespace mlx_fused_attn::cpu {

using namespace mlx::core;

namespace {

void copy_strides(const array& a, fa::stride_t* dst, int n) {
  for (int i = 0; i < n; ++i) {
    dst[i] = a.strides()[i];
  }
}

} // namespace

void attention(
    const AttentionSpec& spec,
    const std::vector<array>& inputs,
    array& out,
    Stream s) {
  const array &q = inputs[0], &k = inputs[1], &v = inputs[2];

  Problem pr{};
  fa::AttnParams& p = pr.p;
  p.B = q.shape(0);
  p.H_q = q.shape(1);
  p.H_kv = k.shape(1);
  p.gqa_factor = p.H_q / p.H_kv;
  p.L_q = q.shape(2);
  p.L_k = k.shape(2);
  p.D = q.shape(3);
  p.D_v = v.shape(3);
  p.causal_offset = p.L_k - p.L_q;
  p.scale_log2 = spec.scale * static_cast<float>(M_LOG2E);
  copy_strides(q, p.q_strides, 3);
  copy_strides(k, p.k_strides, 3);
  copy_strides(v, p.v_strides, 3);
  // The output is allocated row-major [B, H_q, L_q, D_v] by dispatch().
  p.o_strides[2] = p.D_v;
  p.o_strides[1] = p.o_strides[2] * p.L_q;
  p.o_strides[0] = p.o_strides[1] * p.H_q;
  pr.q_dstride = q.strides()[3];
  pr.k_dstride = k.strides()[3];
  pr.v_dstride = v.strides()[3];
  pr.dtype = kernel_dtype(q.dtype());
  pr.mask = spec.mask;

  if (int mi = mask_index(spec); mi >= 0) {
    copy_strides(inputs[mi], p.mask_strides, 4);
  }
  dispatch(
      s, inputs, out,
      [pr, spec](const std::vector<array>& in, array& out) mutable {
        pr.q = in[0].data<void>();
        pr.k = in[1].data<void>();
        pr.v = in[2].data<void>();
        const int mi = mask_index(spec), si = sinks_index(spec);
        pr.mask_data = mi >= 0 ? in[mi].data<void>() : nullptr;
        pr.sinks = si >= 0 ? in[si].data<void>() : nullptr;
        pr.out = out.data<void>();
        run_best(pr);
      });
}

} // namespace mlx_fused_attn::cpu
