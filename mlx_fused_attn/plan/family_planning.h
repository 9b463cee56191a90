// What a kernel family's planning part reads and the checks every family's
// plan makes, float K/V or quantized (quantized_attention_planner.cpp): the
// device and how refusals name the op (PlanTarget), the grid and
// shared-memory limits, whether the family builds, and what the general
// kernel's plan shares with the quantized family's (packed GQA, the key
// splits of its tiles, whether the last split merges them). Each family
// that the attention op can run keeps its planning part in its folder
// (families/<folder>/<name>_planning.cpp: `plan_<name>`, `note_<name>` and
// the `tile_fields` of its tiles, declared here from the registry's
// FA_ATTENTION_CANDIDATES); the planner tries them in the registry's order,
// each behind its switch (family_switched_on). Pure: no backend is reached
// from here.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "mlx_fused_attn/families/registry.h"
#include "mlx_fused_attn/plan/attention_plan.h"
#include "mlx_fused_attn/plan/device_caps.h"
#include "mlx_fused_attn/plan/kernel_switches.h"

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

/// Whether a grid of `p`'s heads and batch fits the device's limit on
/// those axes.
Support grid_fits(const PlanTarget& target, const fa::AttnParams& p);

/// Whether `grid`'s shared memory fits a block; a refusal names `kernel`
/// by `p`'s head dims and its element type `dtype`.
Support smem_fits(
    const PlanTarget& target,
    const char* kernel,
    const fa::AttnParams& p,
    fa::DType dtype,
    const LaunchGrid& grid);

/// Whether `family` can be built on the device (the backend's reason
/// where it cannot).
Support family_built(const DeviceCaps& caps, KernelFamily family);

/// Whether a decode call can pack its GQA groups (packed_gqa): one query
/// row a head, heads sharing K/V.
inline bool packs_gqa(const fa::AttnParams& p) {
  return p.L_q == 1 && p.gqa_factor > 1;
}

/// The packed plan's shapes: H_kv heads of gqa_factor rows, one block's
/// rows, which read their head's K and V once. At L_q = 1 the causal mask
/// hides no key, so the rows need none. `Plan`: AttentionPlan or
/// QuantizedAttentionPlan.
template <typename Plan>
void pack_gqa_rows(Plan& plan) {
  fa::AttnParams& p = plan.params;
  p.L_q = p.gqa_factor;
  p.H_q = p.H_kv;
  p.gqa_factor = 1;
  plan.features.causal = false;
  plan.packed_gqa = true;
}

/// The key splits (split_count.h) of `p`'s query blocks of `tiles`, whose
/// K and V cost `kv_bytes_a_key` a key, so that their threadgroups come
/// near `wave` on a device of `cores`: none where they are off, at most the
/// hint's where it caps them.
int key_splits_of(
    const PlanHint& hint,
    const fa::AttnParams& p,
    const fa::AttnTiles& tiles,
    int64_t kv_bytes_a_key,
    int64_t wave,
    int cores);

/// The key splits of the float kernels: K and V in `dtype`, a wave of
/// tiles.min_blocks threadgroups a multiprocessor.
int key_splits(
    const PlanHint& hint,
    const fa::AttnParams& p,
    const fa::AttnTiles& tiles,
    fa::DType dtype,
    int cores);

/// Whether the last split merges the partials in the kernel (CUDA, unless
/// switched off; Metal keeps the combine kernel, kernels/cuda/split_merge.cuh
/// says why): then a split call may save the LSE too.
inline bool merges_in_kernel(fa::Backend backend) {
  return backend == fa::Backend::Cuda && split_merge_enabled();
}

/// A family's tiles by field name, for the plan's summary (plan_summary.h).
using TileFields = std::vector<std::pair<std::string, int>>;

/// Whether the switch of attention candidate `family` is on
/// (kernel_switches.h's family_switch_variable); a no names the variable.
Support family_switched_on(KernelFamily family);

/// Each attention candidate's planning part, in its folder
/// (families/<folder>/<name>_planning.cpp):
/// - plan_<name> fills the family's tiles, grid and features into `plan`, or
///   says why the family does not take the call;
/// - note_<name> says how a plan it took runs (plan_note, what
///   can_use_fused gives);
/// - tile_fields names the fields of its tiles.
#define FA_DECLARE_FAMILY_PLANNER(e, name, tiles)                     \
  Support plan_##name(const PlanTarget& target, AttentionPlan& plan); \
  std::string note_##name(const AttentionPlan& plan);                 \
  TileFields tile_fields(const fa::tiles& t);
FA_ATTENTION_CANDIDATES(FA_DECLARE_FAMILY_PLANNER)
#undef FA_DECLARE_FAMILY_PLANNER

} // namespace mlx_fused_attn
