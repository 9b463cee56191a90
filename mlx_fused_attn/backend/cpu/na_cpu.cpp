#include "mlx_fused_attn/backend/cpu/na_cpu.h"

#include "mlx_fused_attn/backend/cpu/dispatch.h"
#include "mlx_fused_attn/backend/cpu/problem.h"
#include "mlx_fused_attn/backend/na_params_fill.h"

namespace mlx_fused_attn::cpu {

using namespace mlx::core;

void neighborhood(
    const NaSpec& spec,
    const std::vector<array>& inputs,
    array& out,
    Stream s) {
  dispatch(s, inputs, out, [spec](const std::vector<array>& in, array& out) {
    NaProblem pr{};
    pr.p = na_params(spec, in[0], in[1], in[2], out);
    pr.q_dstride = in[0].strides().back();
    pr.k_dstride = in[1].strides().back();
    pr.v_dstride = in[2].strides().back();
    pr.dtype = kernel_dtype(in[0].dtype());
    pr.q = in[0].data<void>();
    pr.k = in[1].data<void>();
    pr.v = in[2].data<void>();
    pr.out = out.data<void>();
    run_best(pr);
  });
}

} // namespace mlx_fused_attn::cpu
