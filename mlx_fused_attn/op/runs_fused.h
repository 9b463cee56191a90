// Where a validated, planned call runs: the fused kernel where its plan has
// a family; else plain MLX ops, noted (notices.h) with the plan's reason,
// unless the caller forced the fused path, which then raises that reason.
// Every attention op decides it this one way.
#pragma once

#include <stdexcept>

#include "mlx/device.h"
#include "mlx_fused_attn/notices.h"
#include "mlx_fused_attn/op/errors.h"

namespace mlx_fused_attn {

/// Whether `op`'s call with `plan` runs fused on `device` (see above).
/// `Plan`: any plan with fused() and reason.
template <typename Plan>
bool runs_fused(
    const char* op,
    const Plan& plan,
    bool force_fused,
    const mlx::core::Device& device) {
  if (plan.fused()) {
    return true;
  }
  if (force_fused) {
    throw std::invalid_argument(op_message(
        op, "force_fused=True but no fused kernel runs: ", plan.reason));
  }
  note_fallback(op, device, plan.reason);
  return false;
}

} // namespace mlx_fused_attn
