#include "mlx_fused_attn/backend/cpu/attention_cpu.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
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

// Tests set MLX_FUSED_ATTN_POISON=1 so an output element the kernel fails to
// write reads as NaN (all-ones bits are NaN in every float dtype).
bool poison_outputs() {
  static const bool on = [] {
    const char* env = std::getenv("MLX_FUSED_ATTN_POISON");
    return env != nullptr && env[0] == '1';
  }();
  return on;
}

void run_best_kernel(const Problem& pr) {
#if defined(FA_CPU_HAS_AVX2_KERNEL)
  static const bool avx2 = __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  if (avx2) {
    return avx2::run(pr);
  }
#endif
  generic::run(pr);
}

} // namespace

void attention(
    const AttentionSpec& spec,
    const std::vector<array>& inputs,
    array& out,
    Stream s) {
  out.set_data(allocator::malloc(out.nbytes()));
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
  copy_strides(out, p.o_strides, 3);
  pr.q_dstride = q.strides()[3];
  pr.k_dstride = k.strides()[3];
  pr.v_dstride = v.strides()[3];
  pr.dtype = q.dtype() == float16 ? Dtype::Float16
      : q.dtype() == bfloat16    ? Dtype::BFloat16
                                 : Dtype::Float32;
  pr.mask = spec.mask;

  auto& encoder = mlx::core::cpu::get_command_encoder(s);
  for (const auto& a : inputs) {
    encoder.set_input_array(a);
  }
  encoder.set_output_array(out);
  if (int mi = mask_index(spec); mi >= 0) {
    copy_strides(inputs[mi], p.mask_strides, 4);
  }
  // The pointers are read inside the task: the inputs may not be computed
  // yet when eval_cpu runs (it only schedules).
  encoder.dispatch([pr,
                    spec,
                    inputs = [&] {
                      std::vector<array> weak;
                      for (const auto& a : inputs) {
                        weak.push_back(array::unsafe_weak_copy(a));
                      }
                      return weak;
                    }(),
                    out = array::unsafe_weak_copy(out)]() mutable {
    pr.q = inputs[0].data<void>();
    pr.k = inputs[1].data<void>();
    pr.v = inputs[2].data<void>();
    const int mi = mask_index(spec), si = sinks_index(spec);
    pr.mask_data = mi >= 0 ? inputs[mi].data<void>() : nullptr;
    pr.sinks = si >= 0 ? inputs[si].data<void>() : nullptr;
    pr.out = out.data<void>();
    if (poison_outputs()) {
      std::memset(pr.out, 0xff, out.nbytes());
    }
    run_best_kernel(pr);
  });
}

} // namespace mlx_fused_attn::cpu
