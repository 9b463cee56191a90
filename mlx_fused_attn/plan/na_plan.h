// How one neighborhood-attention call runs: its launch plan, built once from
// the call and its stream's device when the op is built (na_planner.h),
// carried by the primitive and read by every backend at eval. Which calls a
// fused kernel covers is the plan's to say: a plan without a family carries
// the reason. This header holds the plan's data only.
#pragma once

#include <optional>
#include <string>

#include "mlx/array.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/families/neighborhood/na_grid.h"
#include "mlx_fused_attn/plan/launch_plan.h"
#include "mlx_fused_attn/families/neighborhood/na_params.h"
#include "mlx_fused_attn/na_spec.h"

namespace mlx_fused_attn {

struct NaPlan {
  NaSpec spec;
  /// KernelFamily::Neighborhood, or none: the call runs as plain MLX ops,
  /// for `reason`.
  std::optional<KernelFamily> family;
  /// The kernels' dtype of q, k, v and the output (set once admitted).
  fa::DType dtype = fa::DType::Float32;
  /// The GPU kernel's tiles (choose_na_tiles); the CPU kernel has none.
  fa::NaTiles tiles{};
  /// Shapes, geometry and scale; the strides are known only at eval
  /// (na_launch_params).
  fa::NaParams params{};
  /// What the GPU kernel reads of its grid: the warps over the axes and the
  /// 1-D runs of tiles (na_grid_choice.h).
  fa::NaGrid na_grid{};
  /// Threadgroups (na_grid.blocks, H, B), warps, dynamic shared memory.
  LaunchGrid grid;
  /// Why no family runs the call (empty when one does).
  std::string reason;

  bool fused() const {
    return family.has_value();
  }
};

} // namespace mlx_fused_attn
