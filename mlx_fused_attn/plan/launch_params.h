// What a backend computes from a plan at eval, when the strides of the
// arrays its kernels read are known: the kernels' parameters, the backward's
// block lists, the partials of split keys. Plan-free: these read a plan's
// data (attention_plan.h, na_plan.h) and never plan; the planners do not
// use them.
#pragma once

#include <cstdint>
#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/plan/attention_plan.h"
#include "mlx_fused_attn/families/attention_backward/attention_backward_kernel_name.h"
#include "mlx_fused_attn/plan/mask_list_layout.h"
#include "mlx_fused_attn/plan/na_plan.h"

namespace mlx_fused_attn {

/// The strides of a plan with packed GQA (attention_plan.h): a query head
/// is a row, `p.L_q` (the packed rows) heads a head, for q, the output and
/// the mask.
void pack_gqa_strides(fa::AttnParams& p);

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

/// The features a backward kernel of `plan` runs with: align_q and align_k
/// by its own blocks (the dK/dV kernel's query blocks are tiles.bk rows and
/// its key blocks tiles.bq, the dQ kernel's the other way round).
fa::AttnFeatures backward_kernel_features(
    const AttentionPlan& plan,
    fa::BwdKernel kernel);

/// The rows of the partials of `key_splits` splits of the keys of `p`'s
/// rows: [key_splits, B, H, L_q] as the kernel's parameters count them
/// (split_keys.h); a row holds D_v outputs and two statistics. Every plan
/// with split keys (the float one, the quantized one) counts them so.
int64_t split_rows(int key_splits, const fa::AttnParams& p);

/// The neighborhood plan's parameters with the strides of the arrays the
/// kernel reads at eval: q, k, v (after any row copies) and the output.
fa::NaParams na_launch_params(
    const NaPlan& plan,
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    const mlx::core::array& out);

} // namespace mlx_fused_attn
