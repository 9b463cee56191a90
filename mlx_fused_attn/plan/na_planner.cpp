#include "mlx_fused_attn/plan/na_planner.h"

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "mlx/utils.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/plan/call_planning.h"
#include "mlx_fused_attn/plan/family_planning.h"
#include "mlx_fused_attn/plan/na_grid_choice.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

/// The plan's family-independent part: shapes, geometry and scale.
NaPlan shape_plan(const NaCall& call) {
  const array& q = call.inputs[0];
  NaPlan plan;
  plan.spec = call.spec;
  fa::NaParams& p = plan.params;
  p.B = q.shape(0);
  p.H = q.shape(-2);
  p.D = q.shape(-1);
  p.D_v = call.inputs[2].shape(-1);
  p.n_axes = call.spec.n_axes;
  p.L = 1;
  for (int a = 0; a < fa::kNaMaxAxes; ++a) {
    p.axes[a] = call.spec.axes[a];
    p.L *= call.spec.axes[a].n;
  }
  p.scale_log2 = call.spec.scale * kLog2e;
  return plan;
}

/// The kernel's own limits, each "no" naming `op` ("[neighborhood_attention]
/// Metal: "). On yes, `plan.dtype` is the kernel's.
Support na_kernel_covers(
    const std::string& op,
    const NaCall& call,
    NaPlan& plan) {
  const array& q = call.inputs[0];
  const array& v = call.inputs[2];
  if (Support takes = gpu_kernels_take(op, q.dtype(), plan.dtype); !takes.ok) {
    return takes;
  }
  std::ostringstream msg;
  msg << op;
  const int D = q.shape(-1);
  if (v.shape(-1) != D) {
    msg << "the kernel needs one head dim for q, k and v; got " << D
        << " for q and k and " << v.shape(-1) << " for v";
    return Support::no(msg.str());
  }
  if (!fa::na_head_dim_supported(D)) {
    msg << "no kernel for head dim " << D << " (";
#define FA_NA_LIST_HEAD_DIM(d) << d << " "
    msg FA_NA_HEAD_DIMS(FA_NA_LIST_HEAD_DIM);
#undef FA_NA_LIST_HEAD_DIM
    msg << "have one)";
    return Support::no(msg.str());
  }
  // Token and key indices are ints in the kernel.
  int64_t tokens = 1;
  for (int a = 1; a + 2 < static_cast<int>(q.ndim()); ++a) {
    tokens *= q.shape(a);
  }
  if (tokens > std::numeric_limits<int>::max()) {
    msg << tokens << " tokens per image; the kernel indexes them with int";
    return Support::no(msg.str());
  }
  return Support::yes();
}

/// Sets the plan's tiles and grid. 1-D calls take runs of tiles
/// (fa::na_run_for) where the kernel can, so that one round of threadgroups
/// fills the device's multiprocessors (none on Metal: a tile a
/// threadgroup).
void plan_na_launch(NaPlan& plan, const DeviceCaps& caps) {
  const fa::Backend backend = *caps.gpu;
  const int sm_count = caps.sm_count;
  const NaSpec& spec = plan.spec;
  const fa::NaParams& p = plan.params;
  const fa::NaTiles tiles =
      fa::choose_na_tiles(p.D, plan.dtype, backend, spec.n_axes);
  plan.tiles = tiles;
  const long long resident =
      sm_count > 0 && fa::na_use_runs(p.D, plan.dtype, backend, spec.n_axes)
      ? static_cast<long long>(sm_count) * tiles.min_blocks
      : 0;
  fa::NaGrid g = fa::na_choose_grid(
      spec.axes, spec.n_axes, tiles.warps, tiles.warp_rows, tiles.key_block);
  g = fa::na_run_for(
      g,
      spec.axes,
      spec.n_axes,
      tiles.key_block,
      tiles.stages,
      static_cast<fa::stride_t>(p.B) * p.H,
      resident,
      caps.na_run_override);
  plan.na_grid = g;
  plan.grid.x = static_cast<unsigned>(g.blocks);
  plan.grid.y = static_cast<unsigned>(p.H);
  plan.grid.z = static_cast<unsigned>(p.B);
  plan.grid.warps = tiles.warps;
}

/// The GPU kernel's limits past its own: the grid and shared memory of
/// the device, each "no" naming `op`; on yes the plan's tiles and grid are
/// set.
Support plan_gpu(
    const std::string& op,
    const DeviceCaps& caps,
    const NaCall& call,
    NaPlan& plan) {
  const fa::NaParams& p = plan.params;
  const int most = caps.max_grid_yz;
  if (most > 0 && (p.B > most || p.H > most)) {
    std::ostringstream msg;
    msg << op << "batch " << p.B << " or heads " << p.H
        << " over the grid limit of " << most;
    return Support::no(msg.str());
  }
  if (!caps.refusal.empty()) {
    return Support::no(op + caps.refusal);
  }
  plan_na_launch(plan, caps);
  if (caps.max_smem_bytes > 0) {
    plan.grid.smem_bytes =
        fa::na_smem_bytes(plan.tiles, p.D, plan.dtype, p.n_axes);
    if (plan.grid.smem_bytes > caps.max_smem_bytes) {
      std::ostringstream msg;
      msg << op << "the kernel for head dim " << p.D << " and "
          << call.inputs[0].dtype() << " needs " << plan.grid.smem_bytes
          << " bytes of shared memory a block; this GPU allows "
          << caps.max_smem_bytes;
      return Support::no(msg.str());
    }
  }
  return Support::yes();
}

} // namespace

NaPlan neighborhood_plan_for(const NaCall& call, const DeviceCaps& caps) {
  NaPlan plan = shape_plan(call);
  for (int a = 0; a < call.spec.n_axes; ++a) {
    // The windows were checked against the op's spatial shape; a shapeless
    // compile that changes it needs the op again, not a new plan.
    if (call.inputs[0].shape(1 + a) != call.spec.axes[a].n) {
      plan.reason =
          "the spatial shape differs from the one the windows were made for";
      return plan;
    }
  }
  if (!admitted(no_empty_input(call.inputs), plan)) {
    return plan;
  }
  Support admits = Support::yes();
  if (caps.cpu) {
    admits = cpu_kernels_take(call.inputs[0].dtype(), plan.dtype);
  } else if (!caps.gpu) {
    admits = Support::no(
        caps.refusal + " with an explicit neighborhood mask");
  } else {
    const std::string op = "[neighborhood_attention] " + caps.name + ": ";
    admits = na_kernel_covers(op, call, plan);
    if (admits.ok) {
      admits = plan_gpu(op, caps, call, plan);
    }
  }
  if (admitted(admits, plan) &&
      admitted(family_built(caps, KernelFamily::Neighborhood), plan)) {
    plan.family = KernelFamily::Neighborhood;
  }
  return plan;
}

} // namespace mlx_fused_attn
