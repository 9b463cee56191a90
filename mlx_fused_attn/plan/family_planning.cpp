#include "mlx_fused_attn/plan/family_planning.h"

#include <sstream>

#include "mlx_fused_attn/kernels/attention_kernel_name.h"

namespace mlx_fused_attn {

Support grid_fits(const PlanTarget& target, const AttentionPlan& plan) {
  const int most = target.caps.max_grid_yz;
  const fa::AttnParams& p = plan.params;
  if (most == 0 || (p.B <= most && p.H_q <= most)) {
    return Support::yes();
  }
  std::ostringstream msg;
  msg << target.op << "batch " << p.B << " or query heads " << p.H_q
      << " over the grid limit of " << most;
  return Support::no(msg.str());
}

Support smem_fits(
    const PlanTarget& target,
    const char* kernel,
    const AttentionPlan& plan) {
  const int allowed = target.caps.max_smem_bytes;
  if (allowed == 0 || plan.grid.smem_bytes <= allowed) {
    return Support::yes();
  }
  std::ostringstream msg;
  msg << target.op << "the " << kernel << " for head dims " << plan.params.D
      << " (q, k) and " << plan.params.D_v << " (v) and "
      << fa::dtype_name(plan.dtype) << " needs " << plan.grid.smem_bytes
      << " bytes of shared memory a block; this GPU allows " << allowed;
  return Support::no(msg.str());
}

Support family_built(const DeviceCaps& caps, KernelFamily family) {
  const std::string* reason = caps.unavailable_reason(family);
  return reason == nullptr ? Support::yes() : Support::no(*reason);
}

} // namespace mlx_fused_attn
