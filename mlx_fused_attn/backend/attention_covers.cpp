#include "mlx_fused_attn/backend/attention_covers.h"

#include <sstream>
#include <string>

#include "mlx/utils.h"
#include "mlx_fused_attn/kernels/attention_backward_config.h"
#include "mlx_fused_attn/kernels/attention_config.h"

namespace mlx_fused_attn::gpu {

namespace mx = mlx::core;

namespace {

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

} // namespace

Support attention_kernel_covers(
    const char* op,
    const std::vector<mx::array>& inputs,
    AttentionPlan& plan) {
  const mx::array& q = inputs[0];
  const mx::array& k = inputs[1];
  const mx::array& v = inputs[2];
  const auto dtype = kernel_dtype(q.dtype());
  if (!dtype) {
    std::ostringstream msg;
    msg << op << "no kernel for dtype " << q.dtype()
        << " (float16, bfloat16 and float32 have one)";
    return Support::no(msg.str());
  }
  plan.dtype = *dtype;
  const int D = q.shape(3);
  const int D_v = v.shape(3);
  if (!fa::attention_head_dims_supported(D, D_v)) {
    std::ostringstream msg;
    msg << op << "no kernel for head dim " << D;
    if (D_v != D) {
      msg << " for q and k with " << D_v << " for v";
    }
    msg << "; head dims with one: " << head_dims_with_a_kernel();
    return Support::no(msg.str());
  }
  if (q.size() == 0 || k.size() == 0) {
    return Support::no(std::string(op) + "empty q or k (nothing to launch)");
  }
  return Support::yes();
}

Support attention_backward_covers(
    const char* op,
    const AttentionCall& call,
    AttentionPlan& plan) {
  if (Support covered = attention_kernel_covers(op, call.inputs, plan);
      !covered.ok) {
    return covered;
  }
  const fa::AttnParams& p = plan.params;
  if (!fa::attention_backward_head_dims_supported(p.D, p.D_v)) {
    std::ostringstream msg;
    msg << op << "head dims " << p.D << " (q, k) and " << p.D_v
        << " (v): the backward kernels take equal head dims of 32, 64, 96 "
           "or 128";
    return Support::no(msg.str());
  }
  if (plan_attention(call).family != KernelFamily::Attention) {
    return Support::no(
        std::string(op) +
        "the forward does not run the general kernel, the one that saves "
        "the row log-sum-exp");
  }
  plan.features.mask_blocks = backward_reads_lists(plan);
  return Support::yes();
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

} // namespace mlx_fused_attn::gpu
