#include "mlx_fused_attn/plan/attention_planner.h"

#include <sstream>

#include "mlx/utils.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_config.h"
#include "mlx_fused_attn/plan/call_planning.h"
#include "mlx_fused_attn/plan/family_planning.h"
#include "mlx_fused_attn/plan/kernel_switches.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

std::string op_name(const DeviceCaps& caps, const char* part) {
  return "[scaled_dot_product_attention] " + caps.name + part + ": ";
}

/// The plan's family-independent part: shapes, scale and mask features.
AttentionPlan shape_plan(const AttentionCall& call) {
  AttentionPlan plan;
  plan.spec = call.spec;
  plan_shapes(
      call.spec, call.inputs[kCallQ].shape(), call.inputs[kCallK].shape(),
      call.inputs[kCallV].shape(3), plan.params, plan.features);
  return plan;
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

/// The GPU kernels' own limits (dtype, head dims), each "no" naming `op`.
/// On yes, `plan.dtype` is the kernels'.
Support gpu_kernel_covers(
    const std::string& op,
    const AttentionCall& call,
    AttentionPlan& plan) {
  if (Support takes =
          gpu_kernels_take(op, call.inputs[kCallQ].dtype(), plan.dtype);
      !takes.ok) {
    return takes;
  }
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

/// The planning part `Plan` of `family`, behind the family's switch
/// (family_switched_on).
template <
    KernelFamily family,
    Support (*Plan)(const PlanTarget&, AttentionPlan&)>
Support plan_if_switched_on(const PlanTarget& target, AttentionPlan& plan) {
  if (Support on = family_switched_on(family); !on.ok) {
    return on;
  }
  return Plan(target, plan);
}

/// The GPU families the op tries, in the registry's order of preference
/// (FA_ATTENTION_CANDIDATES): short sequences run the short kernel
/// (short_attention_covers), whose grid is one axis of sequences; all
/// others the general one.
const FamilyCandidate<AttentionPlan, PlanTarget> kFamilies[] = {
#define FA_FAMILY_CANDIDATE(e, name, tiles) \
  {KernelFamily::e, plan_if_switched_on<KernelFamily::e, plan_##name>},
    FA_ATTENTION_CANDIDATES(FA_FAMILY_CANDIDATE)
#undef FA_FAMILY_CANDIDATE
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
    const PlanTarget& target,
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
  if (Support fits = grid_fits(target, plan.params); !fits.ok) {
    return fits;
  }
  fa::AttnBwdTiles tiles = fa::choose_attention_backward_tiles(
      p.D, plan.dtype, *target.caps.gpu, target.caps.wgmma);
  // Metal has one form; the one-kernel form (opt-in, kernel_switches.h)
  // needs its dK/dV kernel's shared memory (dS and K's copy) to fit.
  tiles.dq_atomics = *target.caps.gpu == fa::Backend::Cuda &&
      backward_one_kernel_enabled() &&
      (target.caps.max_smem_bytes == 0 ||
       fa::attention_backward_smem_bytes(
           tiles.dkdv, p.D, plan.dtype, fa::Backend::Cuda, true) <=
           target.caps.max_smem_bytes);
  plan.tiles = tiles;
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
  if (admitted(cpu_kernels_take(call.inputs[kCallQ].dtype(), plan.dtype),
               plan) &&
      admitted(family_built(caps, family), plan)) {
    plan.family = family;
  }
}

} // namespace

AttentionPlan attention_plan_for(
    const AttentionCall& call,
    const DeviceCaps& caps) {
  AttentionPlan plan = shape_plan(call);
  if (!admitted(no_empty_input(call.inputs), plan)) {
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
  const PlanTarget target{caps, op_name(caps, "")};
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
  if (!admitted(no_empty_input(call.inputs), plan)) {
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
  const PlanTarget target{caps, op_name(caps, " backward")};
  if (admitted(plan_gpu_backward(target, call, forward, plan), plan)) {
    plan.family = KernelFamily::AttentionBackward;
  }
  return plan;
}

std::string plan_note(const AttentionPlan& plan) {
#define FA_FAMILY_NOTE(e, name, tiles)  \
  if (plan.family == KernelFamily::e) { \
    return note_##name(plan);           \
  }
  FA_ATTENTION_CANDIDATES(FA_FAMILY_NOTE)
#undef FA_FAMILY_NOTE
  return "";
}

} // namespace mlx_fused_attn
