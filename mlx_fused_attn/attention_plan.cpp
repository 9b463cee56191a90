#include "mlx_fused_attn/attention_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "mlx_fused_attn/backend/cpu/attention_cpu.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/kernel_switches.h"
#include "mlx_fused_attn/kernels/short_attention_kernel_name.h"
#include "mlx_fused_attn/key_splits.h"
#include "mlx_fused_attn/mask_visits.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

unsigned blocks_of(int64_t items, int per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
}

/// Whether the call runs best as decode with GQA packed (packed_gqa): one
/// query row a head, heads sharing K/V, and one sink a block's rows would
/// not share.
bool packs_gqa(const AttentionPlan& plan) {
  const fa::AttnParams& p = plan.params;
  return p.L_q == 1 && p.gqa_factor > 1 && !plan.features.has_sinks;
}

/// The packed plan's shapes: H_kv heads of gqa_factor rows. At L_q = 1 the
/// causal mask hides no key, so the rows need none.
void pack_gqa_rows(AttentionPlan& plan) {
  fa::AttnParams& p = plan.params;
  p.L_q = p.gqa_factor;
  p.H_q = p.H_kv;
  p.gqa_factor = 1;
  plan.features.causal = false;
  plan.packed_gqa = true;
}

/// The packed strides: a query head is a row, gqa_factor heads a head.
void pack_gqa_strides(fa::AttnParams& p) {
  const int g = p.L_q;
  for (fa::stride_t* s : {p.q_strides, p.o_strides}) {
    s[2] = s[1];
    s[1] *= g;
  }
  p.mask_strides[2] = p.mask_strides[1];
  p.mask_strides[1] *= g;
}

/// Whether the kernels may read the additive mask two columns at a time
/// (params.h's mask_pairs): the pair at an even column below L_k is then
/// aligned to its size and inside the mask.
bool mask_reads_pairs(const array& mask, const fa::AttnParams& p) {
  const int64_t pair_bytes = 2 * int64_t(mask.itemsize());
  return mask.dtype() != bool_ && p.L_k % 2 == 0 &&
      p.mask_strides[3] == 1 && p.mask_strides[0] % 2 == 0 &&
      p.mask_strides[1] % 2 == 0 && p.mask_strides[2] % 2 == 0 &&
      mask.offset() % pair_bytes == 0;
}

/// The key splits of the plan (key_splits.h), none where they are off.
int key_splits(int64_t groups, int64_t wave, int key_blocks, int64_t most) {
  return split_keys_enabled()
      ? key_split_count(groups, wave, key_blocks, most)
      : 1;
}

/// The plan's family-independent part: shapes, scale and mask features.
AttentionPlan shape_plan(const AttentionCall& call) {
  const array& q = call.inputs[0];
  const array& k = call.inputs[1];
  AttentionPlan plan;
  plan.spec = call.spec;
  fa::AttnParams& p = plan.params;
  p.B = q.shape(0);
  p.H_q = q.shape(1);
  p.H_kv = k.shape(1);
  p.gqa_factor = p.H_q / p.H_kv;
  p.L_q = q.shape(2);
  p.L_k = k.shape(2);
  p.D = q.shape(3);
  p.D_v = call.inputs[2].shape(3);
  p.causal_offset = p.L_k - p.L_q;
  p.scale_log2 = call.spec.scale * kLog2e;

  fa::AttnFeatures& f = plan.features;
  f.has_mask = mask_index(call.spec) >= 0;
  f.bool_mask = call.spec.mask == MaskKind::Bool;
  f.causal = call.spec.mask == MaskKind::Causal;
  f.has_sinks = call.spec.has_sinks;
  return plan;
}

using Planner = void (*)(const AttentionCall&, AttentionPlan&);

// The plan of `call` by the planner of its stream's device, once the
// shapes are in and the check every plan shares has passed.
AttentionPlan plan_on_device(
    const AttentionCall& call,
    Planner cpu_planner,
    Planner gpu_planner) {
  AttentionPlan plan = shape_plan(call);
  for (const auto& a : call.inputs) {
    if (a.size() == 0) {
      plan.reason = "an input is empty; empty calls run as plain MLX ops";
      return plan;
    }
  }
  (call.stream.device == Device::cpu ? cpu_planner : gpu_planner)(call, plan);
  return plan;
}

} // namespace

AttentionPlan plan_attention(const AttentionCall& call) {
  return plan_on_device(call, cpu::plan, gpu::plan);
}

AttentionPlan plan_attention_backward(const AttentionCall& call) {
  return plan_on_device(call, cpu::plan_backward, gpu::plan_backward);
}

std::string plan_note(const AttentionPlan& plan) {
  if (plan.family == KernelFamily::ShortAttention) {
    return fa::short_attention_note(std::get<fa::ShortAttnTiles>(plan.tiles));
  }
  if (plan.key_splits > 1) {
    return std::string(kKeySplitsNote) + " " + std::to_string(plan.key_splits) +
        " ways";
  }
  return "";
}

fa::AttnParams launch_params(
    const AttentionPlan& plan,
    const array& q,
    const array& k,
    const array& v,
    const array& out,
    const array* mask,
    const array* visits) {
  fa::AttnParams p = plan.params;
  for (int i = 0; i < 3; ++i) {
    p.q_strides[i] = q.strides()[i];
    p.k_strides[i] = k.strides()[i];
    p.v_strides[i] = v.strides()[i];
    p.o_strides[i] = out.strides()[i];
  }
  if (mask != nullptr) {
    for (int i = 0; i < 4; ++i) {
      p.mask_strides[i] = mask->strides()[i];
    }
  }
  if (visits != nullptr) {
    // The classes have the mask's own batch and heads: 1 broadcasts.
    for (int i = 0; i < 2; ++i) {
      p.mask_block_strides[i] = visits->shape(i) > 1 ? visits->strides()[i] : 0;
    }
    const VisitRows rows =
        visit_rows(p.L_k, std::get<fa::AttnTiles>(plan.tiles).bk);
    p.mask_block_strides[2] = rows.visit;
    p.mask_block_strides[3] = rows.bit_words;
  }
  if (plan.packed_gqa) {
    pack_gqa_strides(p);
  }
  if (mask != nullptr) {
    p.mask_pairs = mask_reads_pairs(*mask, p) ? 1 : 0;
  }
  return p;
}

bool backward_reads_lists(const AttentionPlan& plan) {
  return plan.features.has_mask &&
      (plan.params.gqa_factor == 1 || plan.spec.mask_shared_by_heads) &&
      mask_blocks_enabled();
}

int backward_lists_index(const AttentionPlan& plan) {
  const bool reads = std::holds_alternative<fa::AttnBwdTiles>(plan.tiles) &&
      plan.features.mask_blocks;
  return reads ? kBwdMask + 1 + plan.features.has_sinks : -1;
}

BwdListGrid backward_list_grid(const AttentionPlan& plan, Dtype dtype) {
  const auto& t = std::get<fa::AttnBwdTiles>(plan.tiles);
  return {
      plan.spec.mask, dtype, plan.params.L_q, plan.params.L_k, t.dkdv.bq,
      t.dkdv.bk, t.dq.bq, t.dq.bk};
}

const array* backward_lists(
    const AttentionPlan& plan,
    const std::vector<array>& inputs) {
  const int li = backward_lists_index(plan);
  if (li < 0) {
    return nullptr;
  }
  const BwdListRows rows =
      backward_list_rows(backward_list_grid(plan, inputs[kBwdQ].dtype()));
  if (li >= static_cast<int>(inputs.size()) ||
      inputs[li].shape(2) != rows.total) {
    throw std::invalid_argument(
        "[FusedAttentionVJP] a shapeless compile reached shapes the mask's "
        "block lists were not built for");
  }
  return &inputs[li];
}

fa::AttnBwdParams backward_launch_params(
    const AttentionPlan& plan,
    const std::vector<array>& inputs,
    const std::vector<array>& grads,
    const array* lists) {
  const int mi = mask_index(plan.spec);
  fa::AttnBwdParams p{};
  p.fwd = launch_params(
      plan, inputs[kBwdQ], inputs[kBwdK], inputs[kBwdV], inputs[kBwdOut],
      mi >= 0 ? &inputs[kBwdMask] : nullptr);
  for (int i = 0; i < 3; ++i) {
    p.do_strides[i] = inputs[kBwdDout].strides()[i];
    p.dq_strides[i] = grads[0].strides()[i];
    p.dk_strides[i] = grads[1].strides()[i];
    p.dv_strides[i] = grads[2].strides()[i];
  }
  if (lists != nullptr) {
    // The lists have the mask's own batch and heads: 1 broadcasts.
    for (int i = 0; i < 2; ++i) {
      p.list_strides[i] = lists->shape(i) > 1 ? lists->strides()[i] : 0;
    }
    const BwdListRows rows =
        backward_list_rows(backward_list_grid(plan, inputs[kBwdQ].dtype()));
    p.dkdv_list_row = rows.dkdv_row;
    p.dq_lists_start = rows.dq_start;
    p.dq_list_row = rows.dq_row;
  }
  return p;
}

int visits_index(const AttentionPlan& plan) {
  const bool reads = std::holds_alternative<fa::AttnTiles>(plan.tiles) &&
      plan.features.mask_blocks;
  return reads ? 3 + plan.features.has_mask + plan.features.has_sinks : -1;
}

fa::ShortAttnFeatures short_features(const fa::AttnFeatures& features) {
  fa::ShortAttnFeatures f{};
  f.has_mask = features.has_mask;
  f.bool_mask = features.bool_mask;
  f.causal = features.causal;
  f.has_sinks = features.has_sinks;
  return f;
}

void plan_general_launch(
    AttentionPlan& plan,
    fa::Backend backend,
    bool wgmma,
    int sm_count,
    int cores,
    fa::MetalAttnVariant metal_variant) {
  if (packs_gqa(plan)) {
    pack_gqa_rows(plan);
  }
  const fa::AttnParams& p = plan.params;
  const auto choose = [&](bool large_grid) {
    return fa::choose_attention_tiles(
        p.D, p.D_v, plan.dtype, backend, wgmma, large_grid, metal_variant);
  };
  fa::AttnTiles tiles = choose(false);
  // More query blocks than one wave of the default tiles (their blocks a
  // multiprocessor times the multiprocessors) take the large-grid tiles.
  const int64_t q_blocks = int64_t(blocks_of(p.L_q, tiles.bq)) * p.H_q * p.B;
  if (sm_count > 0 && q_blocks > int64_t(tiles.min_blocks) * sm_count) {
    tiles = choose(true);
  }
  plan.tiles = tiles;
  plan.features.align_q = p.L_q % tiles.bq == 0;
  plan.features.align_k = p.L_k % tiles.bk == 0;
  const int64_t groups = int64_t(blocks_of(p.L_q, tiles.bq)) * p.H_q * p.B;
  // A forward that saves the LSE for the fused backward runs unsplit (the
  // split partials hold no row LSE), and plans the kernel that writes it.
  plan.features.has_lse = plan.spec.saves_lse;
  plan.key_splits = plan.spec.saves_lse ? 1 : key_splits(
      groups,
      int64_t(tiles.min_blocks) * cores,
      static_cast<int>(blocks_of(p.L_k, tiles.bk)),
      splits_worth_their_partials(
          p.L_k, std::min(tiles.bq, p.L_q), p.D, p.D_v,
          // A grid with a block on every other multiprocessor gains less.
          fa::dtype_size(plan.dtype), 2 * groups >= cores ? 16 : 8));
  plan.features.split_keys = plan.key_splits > 1;
  // Packed GQA's query blocks are rows of several heads: they read classes
  // by block only where the heads share the mask (mlx-lm's padding masks).
  plan.features.mask_blocks = plan.features.has_mask &&
      (!plan.packed_gqa || plan.spec.mask_shared_by_heads) &&
      mask_blocks_enabled();
  plan.grid = {
      blocks_of(p.L_q, tiles.bq) * plan.key_splits,
      static_cast<unsigned>(p.H_q),
      static_cast<unsigned>(p.B),
      fa::attention_launch_warps(tiles),
      fa::attention_smem_bytes(tiles, p.D, p.D_v, plan.dtype, backend)};
}

int64_t split_rows(const AttentionPlan& plan) {
  const fa::AttnParams& p = plan.params;
  return int64_t(plan.key_splits) * p.B * p.H_q * p.L_q;
}

Support plan_short_launch(AttentionPlan& plan, fa::Backend backend) {
  const fa::AttnParams& p = plan.params;
  if (!short_attention_enabled()) {
    return Support::no("short-sequence kernel: off (MLX_FUSED_ATTN_SHORT=0)");
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
  return Support::yes();
}

} // namespace mlx_fused_attn
