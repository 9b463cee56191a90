// The general kernel's planning part (plan/family_planning.h): tiles from
// its chooser (the large-grid tiles past one wave; opt-in, the small-grid
// producer tiles on small grids, small_grid.h), packed GQA for decode,
// key splits under a wave and their combine's form, mask classes by block,
// and its grid (persistent for the producer kernel's grids of a few waves,
// persistent_grid.h).
#include <cstdint>

#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/plan/attention_planner.h"
#include "mlx_fused_attn/plan/call.h"
#include "mlx_fused_attn/plan/family_planning.h"
#include "mlx_fused_attn/plan/kernel_switches.h"
#include "mlx_fused_attn/plan/persistent_grid.h"
#include "mlx_fused_attn/plan/small_grid.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn {

namespace {

/// The general kernel's grid: the static one, a block a work tile
/// (query blocks * splits, H_q, B), or `persistent_blocks` that walk those
/// tiles (with persistent tiles).
LaunchGrid general_grid(
    const AttentionPlan& plan,
    const fa::AttnTiles& tiles,
    int64_t persistent_blocks,
    fa::Backend backend) {
  const fa::AttnParams& p = plan.params;
  const int warps = fa::attention_launch_warps(tiles);
  const int smem_bytes =
      fa::attention_smem_bytes(tiles, p.D, p.D_v, plan.dtype, backend);
  if (tiles.persistent) {
    return {static_cast<unsigned>(persistent_blocks), 1, 1, warps, smem_bytes};
  }
  return {
      blocks_of(p.L_q, tiles.bq) * plan.key_splits,
      static_cast<unsigned>(p.H_q),
      static_cast<unsigned>(p.B),
      warps,
      smem_bytes};
}

/// Sets the general kernel's tiles, key splits and grid. `cores`, the
/// device's multiprocessors or GPU cores, sizes the wave that split keys
/// fill. A plan whose spec saves the LSE gets has_lse, and split keys only
/// where the last split merges them.
void plan_general_launch(AttentionPlan& plan, const DeviceCaps& caps) {
  // One sink a head: a block of several heads' rows would not share it.
  if (packs_gqa(plan.params) && !plan.features.has_sinks) {
    pack_gqa_rows(plan);
  }
  const fa::Backend backend = *caps.gpu;
  const fa::AttnParams& p = plan.params;
  const PlanHint& hint = plan.spec.hint;
  const fa::MetalAttnVariant variant =
      backend == fa::Backend::Metal && hint.metal_variant
      ? *hint.metal_variant
      : caps.metal_variant;
  const auto choose = [&](bool large_grid) {
    return fa::choose_attention_tiles(
        p.D, p.D_v, plan.dtype, backend, caps.wgmma, large_grid, variant);
  };
  fa::AttnTiles tiles = choose(false);
  // More query blocks than one wave of the default tiles (their blocks a
  // multiprocessor times the multiprocessors) take the large-grid tiles.
  const int64_t q_blocks = int64_t(blocks_of(p.L_q, tiles.bq)) * p.H_q * p.B;
  if (caps.sm_count > 0 &&
      q_blocks > int64_t(tiles.min_blocks) * caps.sm_count) {
    tiles = choose(true);
  }
  // Opt-in until a GPU run ranks them (issue 46): small grids take the
  // small-grid producer tiles where the head dim has them.
  if (small_grid_producer_enabled() &&
      fa::has_small_grid_tiles(p.D, p.D_v, plan.dtype, backend, caps.wgmma) &&
      small_grid(p, tiles, caps.sm_count)) {
    tiles = fa::choose_small_grid_tiles(p.D);
  }
  plan.features.align_q = p.L_q % tiles.bq == 0;
  plan.features.align_k = p.L_k % tiles.bk == 0;
  // A forward that saves the LSE for the fused backward runs unsplit where
  // a combine kernel merges (it writes no LSE), and plans the kernel that
  // writes it.
  const bool in_kernel = merges_in_kernel(backend);
  plan.features.has_lse = plan.spec.saves_lse;
  plan.key_splits = plan.spec.saves_lse && !in_kernel
      ? 1
      : key_splits(hint, p, tiles, plan.dtype, caps.cores);
  plan.features.split_keys = plan.key_splits > 1;
  plan.split_merge = in_kernel && plan.features.split_keys;
  tiles.split_merge = plan.split_merge && !tiles.producer;
  plan.combine_form = split_combine_form(
      backend, plan.key_splits, p, caps.cores,
      forced_split_combine_form());
  // The producer kernel's grid of a few waves walks its tiles persistent.
  // Split keys stay allowed with it: the last split's merge is its work
  // tile's epilogue (split_merge.cuh), so a persistent block merges inside
  // its walk as a static one does, never waiting on another block (today's
  // tiles keep them apart: the producer's come past one wave, splits under).
  const int64_t work_tiles =
      int64_t(blocks_of(p.L_q, tiles.bq)) * p.H_q * p.B * plan.key_splits;
  const int64_t persistent_blocks = persistent_grid_blocks(
      tiles, work_tiles, caps.sm_count, persistent_choice());
  tiles.persistent = persistent_blocks > 0;
  plan.tiles = tiles;
  // Packed GQA's query blocks are rows of several heads: they read classes
  // by block only where the heads share the mask (mlx-lm's padding masks).
  plan.features.mask_blocks = plan.features.has_mask &&
      (!plan.packed_gqa || plan.spec.mask_shared_by_heads) &&
      mask_blocks_enabled();
  plan.visits_input =
      plan.features.mask_blocks ? call_input_count(plan.spec) : -1;
  // Strides are known at eval: Metal drops stride32 where offsets need 64
  // bits (stride32_fits).
  plan.features.stride32 = variant.stride32;
  plan.grid = general_grid(plan, tiles, persistent_blocks, backend);
}

} // namespace

Support plan_attention(const PlanTarget& target, AttentionPlan& plan) {
  if (Support fits = grid_fits(target, plan.params); !fits.ok) {
    return fits;
  }
  plan_general_launch(plan, target.caps);
  if (Support fits =
          smem_fits(target, "kernel", plan.params, plan.dtype, plan.grid);
      !fits.ok) {
    return fits;
  }
  return family_built(target.caps, KernelFamily::Attention);
}

std::string note_attention(const AttentionPlan& plan) {
  if (plan.key_splits > 1) {
    return std::string(kKeySplitsNote) + " " + std::to_string(plan.key_splits) +
        " ways";
  }
  return "";
}

TileFields tile_fields(const fa::AttnTiles& t) {
  return {
      {"bq", t.bq},
      {"bk", t.bk},
      {"warps", t.warps},
      {"stages", t.stages},
      {"min_blocks", t.min_blocks},
      {"wgmma", t.wgmma},
      {"q_shared", t.q_shared},
      {"producer", t.producer},
      {"persistent", t.persistent}};
}

} // namespace mlx_fused_attn
