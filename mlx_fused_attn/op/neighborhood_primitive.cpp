#include "mlx_fused_attn/op/neighborhood_primitive.h"

namespace mlx_fused_attn {

using namespace mlx::core;

array fused_neighborhood(const NaCall& call, const NaPlan& plan) {
  return array(
      na_output_shape(call.inputs),
      call.inputs[0].dtype(),
      std::make_shared<NeighborhoodAttention>(call.stream, plan, call.inputs),
      call.inputs);
}

bool NeighborhoodFamily::equivalent(const Spec& a, const Spec& b) {
  if (a.n_axes != b.n_axes || a.scale != b.scale) {
    return false;
  }
  for (int i = 0; i < fa::kNaMaxAxes; ++i) {
    const fa::NaAxis &x = a.axes[i], &y = b.axes[i];
    if (x.n != y.n || x.k != y.k || x.d != y.d || x.causal != y.causal) {
      return false;
    }
  }
  return true;
}

} // namespace mlx_fused_attn
