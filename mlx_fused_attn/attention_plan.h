// How one attention call runs: its launch plan, built once from the call
// and its stream's device when the op is built, carried by the primitive
// and read by every backend at eval. Which calls a fused kernel covers is
// the plan's to say: a plan without a family carries the reason. The fused
// backward is planned the same way, into the same struct (its family is
// AttentionBackward), from the forward's call.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/backward_params.h"
#include "mlx_fused_attn/call.h"
#include "mlx_fused_attn/kernels/attention_backward_config.h"
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/kernels/short_attention_config.h"
#include "mlx_fused_attn/kernels/short_attention_features.h"
#include "mlx_fused_attn/launch_plan.h"
#include "mlx_fused_attn/mask_visits.h"
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
  /// The tiles of the family that runs: the general kernel's, the short
  /// kernel's, the backward's two kernels', or none (the CPU kernels have
  /// no tiles).
  std::variant<
      std::monostate,
      fa::AttnTiles,
      fa::ShortAttnTiles,
      fa::AttnBwdTiles>
      tiles;
  /// Decode with GQA (L_q = 1, no sinks) on the general kernel: the query
  /// heads that share a key/value head run as the rows of one query block,
  /// which reads that head's K and V once. `params` then hold H_kv heads of
  /// gqa_factor rows (pack_gqa_rows).
  bool packed_gqa = false;
  /// Threadgroups sharing each query block's keys (split_keys.h): more than
  /// one when the grid is under a wave. grid.x counts them.
  int key_splits = 1;
  /// Shapes and scale; the strides are known only at eval (launch_params).
  fa::AttnParams params{};
  /// The general kernel's; the short kernel reads the ones it shares
  /// (short_features).
  fa::AttnFeatures features{};
  LaunchGrid grid;
  /// Why no family runs the call (empty when one does).
  std::string reason;

  bool fused() const {
    return family.has_value();
  }
};

/// The plan for a validated call on its stream's device.
AttentionPlan plan_attention(const AttentionCall& call);

/// The plan of the fused backward of a validated call (FusedAttentionVJP,
/// backward_primitive.h) on its stream's device: family AttentionBackward,
/// or none with the reason gradients run as plain MLX ops.
AttentionPlan plan_attention_backward(const AttentionCall& call);

/// How plan_note starts for a general-kernel plan that splits the keys
/// (a grid under one wave): routing.py reads it.
constexpr const char* kKeySplitsNote = "keys split";

/// What can_use_fused says of a plan that runs: the family where it is not
/// the general kernel ("short-sequence kernel: ..."), "keys split N ways"
/// where the general kernel splits the keys, else nothing.
std::string plan_note(const AttentionPlan& plan);

/// Where the plan's kernel reads an array mask's key-block visit list
/// (mask_visits.h): the general kernel on a GPU does, as the primitive's
/// last input; -1 where none is read.
int visits_index(const AttentionPlan& plan);

/// The plan's parameters with the strides of the arrays the kernel reads at
/// eval: q, k, v (after any row copies), the output, and the mask and its
/// visit list if any.
fa::AttnParams launch_params(
    const AttentionPlan& plan,
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    const mlx::core::array& out,
    const mlx::core::array* mask,
    const mlx::core::array* visits = nullptr);

/// Whether a GPU backward of `plan` reads an array mask's block lists
/// (mask_visits.h): where each GQA group reads one mask head (the dK/dV
/// kernel streams the group's heads through one list), unless
/// MLX_FUSED_ATTN_MASK_BLOCKS=0. attention_backward_covers keeps the answer
/// in features.mask_blocks.
bool backward_reads_lists(const AttentionPlan& plan);

/// Where the plan's backward kernels read the block lists among
/// FusedAttentionVJP's inputs (the last); -1 where they read none.
int backward_lists_index(const AttentionPlan& plan);

/// What the plan's backward lists are built for, the additive mask cast to
/// `dtype`.
BwdListGrid backward_list_grid(const AttentionPlan& plan, mlx::core::Dtype dtype);

/// The block lists among the backward's `inputs` that the kernels read, or
/// null where they read none; throws where the lists were built for other
/// shapes (a shapeless compile's).
const mlx::core::array* backward_lists(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs);

/// The backward's parameters for inputs {q, k, v, o, lse, dO[, mask]}
/// (after any row copies), gradients {dq, dk, dv} and the block lists if
/// read (backward_lists).
fa::AttnBwdParams backward_launch_params(
    const AttentionPlan& plan,
    const std::vector<mlx::core::array>& inputs,
    const std::vector<mlx::core::array>& grads,
    const mlx::core::array* lists = nullptr);

/// The short kernel's features, as the general kernel's are for the call.
fa::ShortAttnFeatures short_features(const fa::AttnFeatures& features);

// The backends' family lists build on these.

/// Sets the general kernel's tiles, key splits and grid for `backend` (on
/// CUDA with the chooser's device inputs `wgmma` and, through `sm_count`,
/// large_grid). `cores`, the device's multiprocessors or GPU cores, sizes
/// the wave that split keys fill. A plan whose spec saves the LSE gets
/// has_lse and no split keys. `metal_variant`: on Metal, the variant of the
/// kernel's tiles to run (choose_attention_tiles).
void plan_general_launch(
    AttentionPlan& plan,
    fa::Backend backend,
    bool wgmma,
    int sm_count,
    int cores,
    fa::MetalAttnVariant metal_variant = {});

/// The rows of the partials of a plan with split keys: [key_splits, B, H,
/// L_q] as the kernel's parameters count them (split_keys.h); a row holds
/// D_v outputs and two statistics.
int64_t split_rows(const AttentionPlan& plan);

/// Sets the short kernel's tiles and grid for `backend`, or says why it
/// does not take the call.
Support plan_short_launch(AttentionPlan& plan, fa::Backend backend);

} // namespace mlx_fused_attn
