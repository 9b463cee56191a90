#include "mlx_fused_attn/backend/cpu/na_cpu.h"

#include "mlx_fused_attn/backend/cpu/dispatch.h"
#include "mlx_fused_attn/backend/cpu/problem.h"
#include "mlx_fused_attn/plan/launch_params.h"

namespace mlx_fused_attn::cpu {

using namespace mlx::core;

void na_run(
    const NaPlan& plan,
    const std::vector<array>& inputs,
    array& out,
    Stream s) {
  // The parameters are filled in the task, where the output has its
  // row-major strides (dispatch() allocates it).
  std::vector<array> outputs = {out};
  dispatch(s, inputs, outputs, [plan](const std::vector<array>& in,
                                      std::vector<array>& outs) {
    array& out = outs[0];
    NaProblem pr{};
    pr.p = na_launch_params(plan, in[0], in[1], in[2], out);
    pr.q_dstride = in[0].strides().back();
    pr.k_dstride = in[1].strides().back();
    pr.v_dstride = in[2].strides().back();
    pr.dtype = plan.dtype;
    pr.q = in[0].data<void>();
    pr.k = in[1].data<void>();
    pr.v = in[2].data<void>();
    pr.out = out.data<void>();
    run_best(pr);
  });
}

} // namespace mlx_fused_attn::cpu
