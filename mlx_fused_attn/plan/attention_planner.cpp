#include "mlx_fused_attn/plan/attention_planner.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>

#include "mlx/utils.h"
#include "mlx_fused_attn/plan/kernel_switches.h"
#include "mlx_fused_attn/kernels/attention_backward_config.h"
#include "mlx_fused_attn/kernels/short_attention_kernel_name.h"
#include "mlx_fused_attn/plan/split_count.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

/// What a family's planner reads: the device, and how its refusals name
/// the op and the backend ("[scaled_dot_product_attention] CUDA: ").
struct Target {
  const DeviceCaps& caps;
  std::string op;
};

std::string op_name(const DeviceCaps& caps, const char* part) {
  return "[scaled_dot_product_attention] " + caps.name + part + ": ";
}

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

/// The key splits of the plan (split_count.h), none where they are off.
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

/// Whether any input is empty: empty calls run as plain MLX ops.
bool has_empty_input(const AttentionCall& call, AttentionPlan& plan) {
  for (const auto& a : call.inputs) {
    if (a.size() == 0) {
      plan.reason = "an input is empty; empty calls run as plain MLX ops";
      return true;
    }
  }
  return false;
}

/// The head dims with a kernel, from FA_ATTENTION_HEAD_DIMS: "32, 64, ...
/// and 256 (q, k and v alike); 192 for q and k with 128 for v".
std::string head_dims_with_a_kernel() {
  std::ostringstream equal, pairs;
  int n_equal = 0;
#define FA_COUNT_EQUAL(d, dv) n_equal += d == dv;
  FA_ATTENTION_HEAD_DIMS(FA_COUNT_EQUAL)
#undef FA_COUNT_EQUAL
  int i = 0;
#define FA_DESCRIBE(d, dv)                                           \
  if (d == dv) {                                                     \
    equal << (i == 0 ? "" : i + 1 == n_equal ? " and " : ", ") << d; \
    ++i;                                                             \
  } else {                                                           \
    pairs << "; " << d << " for q and k with " << dv << " for v";   \
  }
  FA_ATTENTION_HEAD_DIMS(FA_DESCRIBE)
#undef FA_DESCRIBE
  return equal.str() + " (q, k and v alike)" + pairs.str();
}

/// The CPU kernels' one limit, their element types; on yes, `plan.dtype`
/// is the kernels'.
Support cpu_kernel_covers(const AttentionCall& call, AttentionPlan& plan) {
  const Dtype dtype = call.inputs[0].dtype();
  const auto kernel = kernel_dtype(dtype);
  if (!kernel) {
    std::ostringstream msg;
    msg << "the fused CPU kernel takes float16, bfloat16 or float32, not "
        << dtype << "; this call runs as plain MLX ops";
    return Support::no(msg.str());
  }
  plan.dtype = *kernel;
  return Support::yes();
}

/// The GPU kernels' own limits (dtype, head dims), each "no" naming `op`.
/// On yes, `plan.dtype` is the kernels'.
Support gpu_kernel_covers(
    const std::string& op,
    const AttentionCall& call,
    AttentionPlan& plan) {
  const array& q = call.inputs[0];
  const auto dtype = kernel_dtype(q.dtype());
  if (!dtype) {
    std::ostringstream msg;
    msg << op << "no kernel for dtype " << q.dtype()
        << " (float16, bfloat16 and float32 have one)";
    return Support::no(msg.str());
  }
  plan.dtype = *dtype;
  const int D = plan.params.D;
  const int D_v = plan.params.D_v;
  if (!fa::attention_head_dims_supported(D, D_v)) {
    std::ostringstream msg;
    msg << op << "no kernel for head dim " << D;
    if (D_v != D) {
      msg << " for q and k with " << D_v << " for v";
    }
    msg << "; head dims with one: " << head_dims_with_a_kernel();
    return Support::no(msg.str());
  }
  return Support::yes();
}

/// Whether the plan's grid fits the device's limit on the heads and batch
/// axes.
Support grid_fits(const Target& target, const AttentionPlan& plan) {
  const int most = target.caps.max_grid_yz;
  const fa::AttnParams& p = plan.params;
  if (most == 0 || (p.B <= most && p.H_q <= most)) {
    return Support::yes();
  }
  std::ostringstream msg;
  msg << target.op << "batch " << p.B << " or query heads " << p.H_q
      << " over the grid limit of " << most;
  return Support::no(msg.str());
}

/// Whether the shared memory of the plan's `kernel` fits a block.
Support smem_fits(
    const Target& target,
    const char* kernel,
    const AttentionPlan& plan) {
  const int allowed = target.caps.max_smem_bytes;
  if (allowed == 0 || plan.grid.smem_bytes <= allowed) {
    return Support::yes();
  }
  std::ostringstream msg;
  msg << target.op << "the " << kernel << " for head dims " << plan.params.D
      << " (q, k) and " << plan.params.D_v << " (v) and "
      << fa::dtype_name(plan.dtype) << " needs " << plan.grid.smem_bytes
      << " bytes of shared memory a block; this GPU allows " << allowed;
  return Support::no(msg.str());
}

/// Whether `family` can be built on the device (the backend's reason
/// where it cannot).
Support family_built(const DeviceCaps& caps, KernelFamily family) {
  const std::string* reason = caps.unavailable_reason(family);
  return reason == nullptr ? Support::yes() : Support::no(*reason);
}

/// Sets the general kernel's tiles, key splits and grid. `cores`, the
/// device's multiprocessors or GPU cores, sizes the wave that split keys
/// fill. A plan whose spec saves the LSE gets has_lse and no split keys.
void plan_general_launch(AttentionPlan& plan, const DeviceCaps& caps) {
  if (packs_gqa(plan)) {
    pack_gqa_rows(plan);
  }
  const fa::Backend backend = *caps.gpu;
  const fa::AttnParams& p = plan.params;
  const auto choose = [&](bool large_grid) {
    return fa::choose_attention_tiles(
        p.D, p.D_v, plan.dtype, backend, caps.wgmma, large_grid,
        caps.metal_variant);
  };
  fa::AttnTiles tiles = choose(false);
  // More query blocks than one wave of the default tiles (their blocks a
  // multiprocessor times the multiprocessors) take the large-grid tiles.
  const int64_t q_blocks = int64_t(blocks_of(p.L_q, tiles.bq)) * p.H_q * p.B;
  if (caps.sm_count > 0 &&
      q_blocks > int64_t(tiles.min_blocks) * caps.sm_count) {
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
      int64_t(tiles.min_blocks) * caps.cores,
      static_cast<int>(blocks_of(p.L_k, tiles.bk)),
      splits_worth_their_partials(
          p.L_k, std::min(tiles.bq, p.L_q), p.D, p.D_v,
          // A grid with a block on every other multiprocessor gains less.
          fa::dtype_size(plan.dtype), 2 * groups >= caps.cores ? 16 : 8));
  plan.features.split_keys = plan.key_splits > 1;
  // Packed GQA's query blocks are rows of several heads: they read classes
  // by block only where the heads share the mask (mlx-lm's padding masks).
  plan.features.mask_blocks = plan.features.has_mask &&
      (!plan.packed_gqa || plan.spec.mask_shared_by_heads) &&
      mask_blocks_enabled();
  plan.visits_input =
      plan.features.mask_blocks ? call_input_count(plan.spec) : -1;
  // Strides are known at eval: Metal drops stride32 where offsets need 64
  // bits (stride32_fits).
  plan.features.stride32 = caps.metal_variant.stride32;
  plan.grid = {
      blocks_of(p.L_q, tiles.bq) * plan.key_splits,
      static_cast<unsigned>(p.H_q),
      static_cast<unsigned>(p.B),
      fa::attention_launch_warps(tiles),
      fa::attention_smem_bytes(tiles, p.D, p.D_v, plan.dtype, backend)};
}

/// Sets the short kernel's tiles and grid, or says why it does not take
/// the call.
Support plan_short(const Target& target, AttentionPlan& plan) {
  const fa::Backend backend = *target.caps.gpu;
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
  if (Support fits = smem_fits(target, "short kernel", plan); !fits.ok) {
    return fits;
  }
  return family_built(target.caps, KernelFamily::ShortAttention);
}

Support plan_general(const Target& target, AttentionPlan& plan) {
  if (Support fits = grid_fits(target, plan); !fits.ok) {
    return fits;
  }
  plan_general_launch(plan, target.caps);
  if (Support fits = smem_fits(target, "kernel", plan); !fits.ok) {
    return fits;
  }
  return family_built(target.caps, KernelFamily::Attention);
}

/// The GPU families in order of preference: short sequences run the short
/// kernel (short_attention_covers), whose grid is one axis of sequences;
/// all others the general one.
const FamilyCandidate<AttentionPlan, Target> kFamilies[] = {
    {KernelFamily::ShortAttention, plan_short},
    {KernelFamily::Attention, plan_general},
};

/// Whether the backward reads an array mask's block lists
/// (kernels/mask_visits.h): where each GQA group reads one mask head (the
/// dK/dV kernel streams the group's heads through one list), unless
/// MLX_FUSED_ATTN_MASK_BLOCKS=0.
bool backward_reads_lists(const AttentionPlan& plan) {
  return plan.features.has_mask &&
      (plan.params.gqa_factor == 1 || plan.spec.mask_shared_by_heads) &&
      mask_blocks_enabled();
}

/// The GPU backward's limits on top of the forward kernel's, each "no"
/// naming the op; on yes its tiles and the block lists it reads are set.
Support plan_gpu_backward(
    const Target& target,
    const AttentionCall& call,
    const AttentionPlan& forward,
    AttentionPlan& plan) {
  if (Support covered = gpu_kernel_covers(target.op, call, plan);
      !covered.ok) {
    return covered;
  }
  const fa::AttnParams& p = plan.params;
  if (!fa::attention_backward_head_dims_supported(p.D, p.D_v)) {
    std::ostringstream msg;
    msg << target.op << "head dims " << p.D << " (q, k) and " << p.D_v
        << " (v): the backward kernels take equal head dims of 32, 64, 96 "
           "or 128";
    return Support::no(msg.str());
  }
  if (forward.family != KernelFamily::Attention) {
    return Support::no(
        target.op +
        "the forward does not run the general kernel, the one that saves "
        "the row log-sum-exp");
  }
  plan.features.mask_blocks = backward_reads_lists(plan);
  if (Support fits = grid_fits(target, plan); !fits.ok) {
    return fits;
  }
  plan.tiles = fa::choose_attention_backward_tiles(
      p.D, plan.dtype, *target.caps.gpu, target.caps.wgmma);
  plan.lists_input =
      plan.features.mask_blocks ? optional_inputs(plan.spec, kBwdMask).end : -1;
  return family_built(target.caps, KernelFamily::AttentionBackward);
}

/// Plans `family` on the CPU kernels: the element types, then whether
/// they are built.
void plan_cpu(
    const AttentionCall& call,
    const DeviceCaps& caps,
    KernelFamily family,
    AttentionPlan& plan) {
  if (admitted(cpu_kernel_covers(call, plan), plan) &&
      admitted(family_built(caps, family), plan)) {
    plan.family = family;
  }
}

} // namespace

AttentionPlan attention_plan_for(
    const AttentionCall& call,
    const DeviceCaps& caps) {
  AttentionPlan plan = shape_plan(call);
  if (has_empty_input(call, plan)) {
    return plan;
  }
  if (caps.cpu) {
    plan_cpu(call, caps, KernelFamily::Attention, plan);
    return plan;
  }
  if (!caps.gpu) {
    plan.reason = caps.refusal;
    return plan;
  }
  const Target target{caps, op_name(caps, "")};
  if (!admitted(gpu_kernel_covers(target.op, call, plan), plan)) {
    return plan;
  }
  if (!caps.refusal.empty()) {
    plan.reason = target.op + caps.refusal;
    return plan;
  }
  choose_family(kFamilies, target, plan);
  return plan;
}

AttentionPlan attention_backward_plan_for(
    const AttentionCall& call,
    const DeviceCaps& caps,
    const AttentionPlan& forward) {
  AttentionPlan plan = shape_plan(call);
  if (has_empty_input(call, plan)) {
    return plan;
  }
  if (caps.cpu) {
    plan_cpu(call, caps, KernelFamily::AttentionBackward, plan);
    return plan;
  }
  if (!caps.gpu) {
    plan.reason = caps.refusal;
    return plan;
  }
  const Target target{caps, op_name(caps, " backward")};
  if (admitted(plan_gpu_backward(target, call, forward, plan), plan)) {
    plan.family = KernelFamily::AttentionBackward;
  }
  return plan;
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

} // namespace mlx_fused_attn
