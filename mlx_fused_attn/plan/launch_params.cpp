#include "mlx_fused_attn/plan/launch_params.h"

#include <stdexcept>
#include <variant>

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

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

/// Strides of [batch, axis 0..2, head] of a [B, *spatial, H, D] array; 0 on
/// unused axes.
void na_strides(const array& x, int n_axes, fa::stride_t* dst) {
  dst[0] = x.strides()[0];
  for (int a = 0; a < fa::kNaMaxAxes; ++a) {
    dst[1 + a] = a < n_axes ? x.strides()[1 + a] : 0;
  }
  dst[4] = x.strides()[1 + n_axes];
}

} // namespace

void pack_gqa_strides(fa::AttnParams& p) {
  const int g = p.L_q;
  for (fa::stride_t* s : {p.q_strides, p.o_strides}) {
    s[2] = s[1];
    s[1] *= g;
  }
  p.mask_strides[2] = p.mask_strides[1];
  p.mask_strides[1] *= g;
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

BwdListGrid backward_list_grid(const AttentionPlan& plan, Dtype dtype) {
  const auto& t = std::get<fa::AttnBwdTiles>(plan.tiles);
  return {
      plan.spec.mask, dtype, plan.params.L_q, plan.params.L_k, t.dkdv.bq,
      t.dkdv.bk, t.dq.bq, t.dq.bk};
}

const array* backward_lists(
    const AttentionPlan& plan,
    const std::vector<array>& inputs) {
  const int li = plan.lists_input;
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
  const int mi = optional_inputs(plan.spec, kBwdMask).mask;
  fa::AttnBwdParams p{};
  p.fwd = launch_params(
      plan, inputs[kBwdQ], inputs[kBwdK], inputs[kBwdV], inputs[kBwdOut],
      mi >= 0 ? &inputs[mi] : nullptr);
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

fa::AttnFeatures backward_kernel_features(
    const AttentionPlan& plan,
    fa::BwdKernel kernel) {
  const fa::AttnTiles tiles = std::get<fa::AttnBwdTiles>(plan.tiles).of(kernel);
  const bool dkdv = kernel == fa::BwdKernel::DkDv;
  const int q_rows = dkdv ? tiles.bk : tiles.bq;
  const int k_rows = dkdv ? tiles.bq : tiles.bk;
  fa::AttnFeatures f = plan.features;
  f.align_q = plan.params.L_q % q_rows == 0;
  f.align_k = plan.params.L_k % k_rows == 0;
  return f;
}

int64_t split_rows(int key_splits, const fa::AttnParams& p) {
  return int64_t(key_splits) * p.B * p.H_q * p.L_q;
}

fa::NaParams na_launch_params(
    const NaPlan& plan,
    const array& q,
    const array& k,
    const array& v,
    const array& out) {
  fa::NaParams p = plan.params;
  na_strides(q, p.n_axes, p.q_strides);
  na_strides(k, p.n_axes, p.k_strides);
  na_strides(v, p.n_axes, p.v_strides);
  na_strides(out, p.n_axes, p.o_strides);
  return p;
}

} // namespace mlx_fused_attn
