// The short-sequence kernel's planning part (plan/family_planning.h): its
// coverage rule, tiles and grid, one axis of sequences; what its plans say
// of themselves.
#include <cstdint>
#include <limits>
#include <string>
#include <variant>

#include "mlx_fused_attn/families/short_attention/short_attention_config.h"
#include "mlx_fused_attn/families/short_attention/short_attention_kernel_name.h"
#include "mlx_fused_attn/plan/family_planning.h"

namespace mlx_fused_attn {

/// Sets the short kernel's tiles and grid, or says why it does not take
/// the call.
Support plan_short_attention(const PlanTarget& target, AttentionPlan& plan) {
  const fa::Backend backend = *target.caps.gpu;
  const fa::AttnParams& p = plan.params;
  if (!plan.spec.hint.short_kernel) {
    return Support::no("short-sequence kernel: off (the call's plan hint)");
  }
  if (plan.spec.saves_lse) {
    return Support::no(
        "short-sequence kernel: writes no row log-sum-exp for the backward");
  }
  if (!fa::short_attention_covers(
          p.L_q, p.L_k, p.D, p.D_v, plan.dtype, backend)) {
    return Support::no(
        "short-sequence kernel: no instance for these lengths and head dims");
  }
  // The kernel numbers sequences with an int, on one grid axis.
  const int64_t sequences = int64_t(p.B) * p.H_q;
  if (sequences > std::numeric_limits<int>::max()) {
    return Support::no("short-sequence kernel: more sequences than an int");
  }
  const fa::ShortAttnTiles tiles = fa::choose_short_attention_tiles(
      p.D, plan.dtype, backend, fa::short_attention_seq(p.L_q, p.L_k));
  plan.tiles = tiles;
  plan.grid = {
      blocks_of(sequences, tiles.problems),
      1,
      1,
      tiles.warps,
      fa::short_attention_smem_bytes(tiles, p.D, plan.dtype)};
  if (Support fits = smem_fits(
          target, "short kernel", plan.params, plan.dtype, plan.grid);
      !fits.ok) {
    return fits;
  }
  return family_built(target.caps, KernelFamily::ShortAttention);
}

std::string note_short_attention(const AttentionPlan& plan) {
  return fa::short_attention_note(std::get<fa::ShortAttnTiles>(plan.tiles));
}

TileFields tile_fields(const fa::ShortAttnTiles& t) {
  return {
      {"seq", t.seq},
      {"warp_rows", t.warp_rows},
      {"warps", t.warps},
      {"problems", t.problems}};
}

} // namespace mlx_fused_attn
