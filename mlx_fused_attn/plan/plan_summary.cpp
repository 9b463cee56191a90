#include "mlx_fused_attn/plan/plan_summary.h"

#include <variant>

#include "mlx_fused_attn/plan/attention_planner.h"
#include "mlx_fused_attn/plan/family_planning.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn {

namespace {

PlanCode code_of(const AttentionPlan& plan) {
  if (!plan.fused()) {
    return PlanCode::NoKernel;
  }
  if (std::holds_alternative<std::monostate>(plan.tiles)) {
    return PlanCode::CpuKernel;
  }
  if (plan.family == KernelFamily::ShortAttention) {
    return PlanCode::ShortKernel;
  }
  return plan.key_splits > 1 ? PlanCode::KeysSplit : PlanCode::GeneralKernel;
}

/// The fields of the tiles of the family that runs (each candidate's
/// tile_fields, in its folder); none on the CPU. Forward plans only: the
/// backward's tiles are not summarized.
struct TileFieldsOf {
  TileFields operator()(std::monostate) const {
    return {};
  }
  TileFields operator()(const fa::AttnBwdTiles&) const {
    return {};
  }
  template <typename Tiles>
  TileFields operator()(const Tiles& tiles) const {
    return tile_fields(tiles);
  }
};

/// The form of the combine kernel that merges the plan's split keys, by
/// name; empty where none runs.
std::string combine_form_of(const AttentionPlan& plan) {
  if (plan.key_splits <= 1 || plan.split_merge) {
    return "";
  }
  return split_combine_form_name(plan.combine_form);
}

} // namespace

const char* plan_code_name(PlanCode code) {
  switch (code) {
    case PlanCode::CpuKernel:
      return "cpu_kernel";
    case PlanCode::ShortKernel:
      return "short_kernel";
    case PlanCode::KeysSplit:
      return "keys_split";
    case PlanCode::GeneralKernel:
      return "general_kernel";
    case PlanCode::NoKernel:
      return "no_kernel";
  }
  return "unknown";
}

PlanSummary summarize_plan(const AttentionPlan& plan) {
  PlanSummary s;
  s.code = code_of(plan);
  if (!plan.fused()) {
    s.message = plan.reason;
  } else if (s.code == PlanCode::CpuKernel) {
    s.message = "the CPU kernel";
  } else if (s.code == PlanCode::GeneralKernel) {
    s.message = "the general kernel, keys unsplit";
  } else {
    s.message = plan_note(plan);
  }
  s.family = plan.fused() ? family_name(*plan.family) : "";
  s.key_splits = plan.key_splits;
  s.packed_gqa = plan.packed_gqa;
  s.split_merge = plan.split_merge;
  s.combine_form = combine_form_of(plan);
  s.tiles = std::visit(TileFieldsOf{}, plan.tiles);
  return s;
}

} // namespace mlx_fused_attn
