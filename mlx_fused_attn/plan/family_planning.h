// What a kernel family's planning part reads and the checks every family's
// plan makes: the device and how refusals name the op (PlanTarget), the
// grid and shared-memory limits, whether the family builds. Each family that
// the attention op can run keeps its planning part in its folder
// (families/<folder>/<name>_planning.cpp, `plan_<name>`, declared here from
// the registry's FA_ATTENTION_CANDIDATES); the planner tries them in the
// registry's order. Pure: no backend is reached from here.
#pragma once

#include <cstdint>
#include <string>

#include "mlx_fused_attn/families/registry.h"
#include "mlx_fused_attn/plan/attention_plan.h"
#include "mlx_fused_attn/plan/device_caps.h"

namespace mlx_fused_attn {

/// What a family's planner reads: the device, and how its refusals name
/// the op and the backend ("[scaled_dot_product_attention] CUDA: ").
struct PlanTarget {
  const DeviceCaps& caps;
  std::string op;
};

/// Blocks of `per_block` that cover `items`.
inline unsigned blocks_of(int64_t items, int per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
}

/// Whether the plan's grid fits the device's limit on the heads and batch
/// axes.
Support grid_fits(const PlanTarget& target, const AttentionPlan& plan);

/// Whether the shared memory of the plan's `kernel` fits a block.
Support smem_fits(
    const PlanTarget& target,
    const char* kernel,
    const AttentionPlan& plan);

/// Whether `family` can be built on the device (the backend's reason
/// where it cannot).
Support family_built(const DeviceCaps& caps, KernelFamily family);

/// Each attention candidate's planning part: fills the family's tiles, grid
/// and features into `plan`, or says why the family does not take the call.
#define FA_DECLARE_FAMILY_PLANNER(e, name) \
  Support plan_##name(const PlanTarget& target, AttentionPlan& plan);
FA_ATTENTION_CANDIDATES(FA_DECLARE_FAMILY_PLANNER)
#undef FA_DECLARE_FAMILY_PLANNER

} // namespace mlx_fused_attn
