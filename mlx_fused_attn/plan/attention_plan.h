// How one attention call runs: its launch plan, built once from the call
// and its stream's device when the op is built (attention_planner.h),
// carried by the primitive and read by every backend at eval. Which calls a
// fused kernel covers is the plan's to say: a plan without a family carries
// the reason. The fused backward is planned the same way, into the same
// struct (its family is AttentionBackward), from the forward's call. This
// header holds the plan's data only: the backends read it, and what they
// compute from it at eval (the strides) is launch_params.h's.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_config.h"
#include "mlx_fused_attn/families/attention_backward/backward_params.h"
#include "mlx_fused_attn/families/registry.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/split_combine_form.h"
#include "mlx_fused_attn/plan/call.h"
#include "mlx_fused_attn/plan/candidate_tiles.h"
#include "mlx_fused_attn/plan/launch_plan.h"
#include "mlx_fused_attn/params.h"

namespace mlx_fused_attn {

struct AttentionPlan {
  AttentionSpec spec;
  /// The kernel family that runs the call; none: it runs as plain MLX ops,
  /// for `reason`.
  std::optional<KernelFamily> family;
  /// The kernels' dtype of q, k, v and the output (set once a backend
  /// admits it).
  fa::DType dtype = fa::DType::Float32;
  /// The tiles of the family that runs: each attention candidate's own
  /// type (FA_ATTENTION_CANDIDATES: the short kernel's, the general
  /// kernel's), the backward's two kernels', or none (the CPU kernels have
  /// no tiles).
#define FA_CANDIDATE_TILES(e, name, tiles) fa::tiles,
  std::variant<
      std::monostate,
      FA_ATTENTION_CANDIDATES(FA_CANDIDATE_TILES) fa::AttnBwdTiles>
      tiles;
#undef FA_CANDIDATE_TILES
  /// Decode with GQA (L_q = 1, no sinks) on the general kernel: the query
  /// heads that share a key/value head run as the rows of one query block,
  /// which reads that head's K and V once. `params` then hold H_kv heads of
  /// gqa_factor rows (pack_gqa_rows).
  bool packed_gqa = false;
  /// Threadgroups sharing each query block's keys (split_keys.h): more than
  /// one when the grid is under a wave. grid.x counts them.
  int key_splits = 1;
  /// With key splits on CUDA: the last split of each query block merges
  /// the partials (kernels/cuda/split_merge.cuh), which then may also give
  /// the LSE; else a combine kernel merges them (Metal always).
  bool split_merge = false;
  /// The form of the combine kernel that merges them where the kernel does
  /// not (plan/split_count.h's split_combine_form).
  fa::SplitCombineForm combine_form = fa::SplitCombineForm::OneElement;
  /// Where the general kernel reads an array mask's key-block visit list
  /// (kernels/mask_visits.h) among the primitive's inputs: the last, after
  /// the call's own; -1 where it reads none.
  int visits_input = -1;
  /// Where the backward kernels read the mask's block lists among
  /// FusedAttentionVJP's inputs (the last); -1 where they read none.
  int lists_input = -1;
  /// Shapes and scale; the strides are known only at eval (launch_params).
  fa::AttnParams params{};
  /// The general kernel's; another family reads the ones it shares (the
  /// short kernel: short_attention_launch_features.h).
  fa::AttnFeatures features{};
  LaunchGrid grid;
  /// Why no family runs the call (empty when one does).
  std::string reason;

  bool fused() const {
    return family.has_value();
  }
};

} // namespace mlx_fused_attn
