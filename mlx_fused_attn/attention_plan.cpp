#include "mlx_fused_attn/attention_plan.h"

#include <cstdint>
#include <limits>

#include "mlx_fused_attn/backend/cpu/attention_cpu.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/backend/short_attention_switch.h"
#include "mlx_fused_attn/kernels/short_attention_kernel_name.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

unsigned blocks_of(int64_t items, int per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
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

} // namespace

AttentionPlan plan_attention(const AttentionCall& call) {
  AttentionPlan plan = shape_plan(call);
  for (const auto& a : call.inputs) {
    if (a.size() == 0) {
      plan.reason = "an input is empty; empty calls run as plain MLX ops";
      return plan;
    }
  }
  if (call.stream.device == Device::cpu) {
    cpu::plan(call, plan);
  } else {
    gpu::plan(call, plan);
  }
  return plan;
}

std::string plan_note(const AttentionPlan& plan) {
  if (plan.family == KernelFamily::ShortAttention) {
    return fa::short_attention_note(std::get<fa::ShortAttnTiles>(plan.tiles));
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
    // A visit list has the mask's own batch and heads: 1 broadcasts.
    for (int i = 0; i < 3; ++i) {
      p.visit_strides[i] = visits->shape(i) > 1 ? visits->strides()[i] : 0;
    }
  }
  return p;
}

int visits_index(const AttentionPlan& plan) {
  const bool reads = std::holds_alternative<fa::AttnTiles>(plan.tiles) &&
      plan.features.has_mask;
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
    int sm_count) {
  const fa::AttnParams& p = plan.params;
  const auto choose = [&](bool large_grid) {
    return fa::choose_attention_tiles(
        p.D, p.D_v, plan.dtype, backend, wgmma, large_grid);
  };
  fa::AttnTiles tiles = choose(false);
  // More query blocks than one wave of the default tiles (their blocks a
  // multiprocessor times the multiprocessors) take the large-grid tiles.
  const int64_t q_blocks = int64_t(blocks_of(p.L_q, tiles.bq)) * p.H_q * p.B;
  plan.wgmma = wgmma;
  plan.large_grid =
      sm_count > 0 && q_blocks > int64_t(tiles.min_blocks) * sm_count;
  if (plan.large_grid) {
    tiles = choose(true);
  }
  plan.tiles = tiles;
  plan.features.align_q = p.L_q % tiles.bq == 0;
  plan.features.align_k = p.L_k % tiles.bk == 0;
  plan.grid = {
      blocks_of(p.L_q, tiles.bq),
      static_cast<unsigned>(p.H_q),
      static_cast<unsigned>(p.B),
      tiles.warps,
      fa::attention_smem_bytes(tiles, p.D, p.D_v, plan.dtype, backend)};
}

Support plan_short_launch(AttentionPlan& plan, fa::Backend backend) {
  const fa::AttnParams& p = plan.params;
  if (!short_attention_enabled()) {
    return Support::no("short-sequence kernel: off (MLX_FUSED_ATTN_SHORT=0)");
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
