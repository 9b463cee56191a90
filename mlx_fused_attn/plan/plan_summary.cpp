#include "mlx_fused_attn/plan/plan_summary.h"

#include "mlx_fused_attn/plan/attention_planner.h"

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

std::vector<std::pair<std::string, int>> tile_fields(
    const AttentionPlan& plan) {
  if (const auto* t = std::get_if<fa::AttnTiles>(&plan.tiles)) {
    return {
        {"bq", t->bq},
        {"bk", t->bk},
        {"warps", t->warps},
        {"stages", t->stages},
        {"min_blocks", t->min_blocks},
        {"wgmma", t->wgmma},
        {"q_shared", t->q_shared},
        {"producer", t->producer},
        {"persistent", t->persistent}};
  }
  if (const auto* t = std::get_if<fa::ShortAttnTiles>(&plan.tiles)) {
    return {
        {"seq", t->seq},
        {"warp_rows", t->warp_rows},
        {"warps", t->warps},
        {"problems", t->problems}};
  }
  return {};
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
  s.tiles = tile_fields(plan);
  return s;
}

} // namespace mlx_fused_attn
