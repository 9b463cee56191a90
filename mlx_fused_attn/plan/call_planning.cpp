#include "mlx_fused_attn/plan/call_planning.h"

#include <sstream>

#include "mlx/utils.h"
#include "mlx_fused_attn/plan/call.h"
#include "mlx_fused_attn/plan/launch_plan.h"

namespace mlx_fused_attn {

void plan_shapes(
    const AttentionSpec& spec,
    const mlx::core::Shape& q,
    const mlx::core::Shape& k,
    int D_v,
    fa::AttnParams& p,
    fa::AttnFeatures& f) {
  p.B = q[0];
  p.H_q = q[1];
  p.H_kv = k[1];
  p.gqa_factor = p.H_q / p.H_kv;
  p.L_q = q[2];
  p.L_k = k[2];
  p.D = q[3];
  p.D_v = D_v;
  p.causal_offset = p.L_k - p.L_q;
  p.scale_log2 = spec.scale * kLog2e;

  f.has_mask = optional_inputs(spec, 0).mask >= 0;
  f.bool_mask = spec.mask == MaskKind::Bool;
  f.causal = spec.mask == MaskKind::Causal;
  f.has_sinks = spec.has_sinks;
}

Support no_empty_input(const std::vector<mlx::core::array>& inputs) {
  for (const auto& a : inputs) {
    if (a.size() == 0) {
      return Support::no("an input is empty; empty calls run as plain MLX ops");
    }
  }
  return Support::yes();
}

Support cpu_kernels_take(mlx::core::Dtype dtype, fa::DType& kernel) {
  const auto kernels = kernel_dtype(dtype);
  if (!kernels) {
    std::ostringstream msg;
    msg << "the fused CPU kernel takes float16, bfloat16 or float32, not "
        << dtype << "; this call runs as plain MLX ops";
    return Support::no(msg.str());
  }
  kernel = *kernels;
  return Support::yes();
}

Support gpu_kernels_take(
    const std::string& op,
    mlx::core::Dtype dtype,
    fa::DType& kernel) {
  const auto kernels = kernel_dtype(dtype);
  if (!kernels) {
    std::ostringstream msg;
    msg << op << "no kernel for dtype " << dtype
        << " (float16, bfloat16 and float32 have one)";
    return Support::no(msg.str());
  }
  kernel = *kernels;
  return Support::yes();
}

} // namespace mlx_fused_attn
