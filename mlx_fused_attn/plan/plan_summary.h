// What a call's plan is, in a form Python reads (mlx_fused_attn.plan_summary):
// the family, its tiles, the key splits and a reason code with its message.
// Routing switches on the code; the message is for people.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "mlx_fused_attn/plan/attention_plan.h"

namespace mlx_fused_attn {

/// Why the plan is what it is.
enum class PlanCode {
  CpuKernel, ///< the CPU kernel runs the call
  ShortKernel, ///< the short-sequence kernel (L_q and L_k held whole)
  KeysSplit, ///< the general kernel, keys split over a grid under one wave
  GeneralKernel, ///< the general kernel, each query block's keys in one run
  NoKernel, ///< no family covers the call: plain MLX ops, for the message
};

struct PlanSummary {
  PlanCode code;
  /// For people: which kernel runs and how, or why none does (the reason
  /// can_use_fused gives).
  std::string message;
  /// The family's name (family_name); empty where none runs.
  std::string family;
  int key_splits = 1;
  /// Decoding with GQA: a key/value head's query heads are one block's rows.
  bool packed_gqa = false;
  /// Split keys merged by the kernel's last split, not a combine kernel.
  bool split_merge = false;
  /// The combine kernel's form ("one_element", "grouped";
  /// kernels/split_combine_form.h) where one merges the split keys; empty
  /// where none runs.
  std::string combine_form;
  /// The family's tiles by field name (empty on the CPU, which has none).
  std::vector<std::pair<std::string, int>> tiles;
};

/// The code's name as Python sees it ("short_kernel", ...).
const char* plan_code_name(PlanCode code);

/// The summary of a forward plan.
PlanSummary summarize_plan(const AttentionPlan& plan);

} // namespace mlx_fused_attn
