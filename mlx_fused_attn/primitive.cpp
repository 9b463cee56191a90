#include "mlx_fused_attn/primitive.h"

#include "mlx_fused_attn/mask_visits.h"

namespace mlx_fused_attn {

using namespace mlx::core;

array fused_attention(
    const AttentionCall& call,
    const AttentionPlan& plan,
    const array* user_mask) {
  // A vmap's folded call still carries the visit list of the unfolded one.
  const int n_call = 3 + (mask_index(call.spec) >= 0) + call.spec.has_sinks;
  std::vector<array> inputs(
      call.inputs.begin(), call.inputs.begin() + n_call);
  if (visits_index(plan) >= 0) {
    const auto& tiles = std::get<fa::AttnTiles>(plan.tiles);
    const array& mask = user_mask ? *user_mask : inputs[mask_index(call.spec)];
    const VisitGrid grid = {
        call.spec.mask, inputs[0].dtype(), inputs[0].shape(2),
        inputs[1].shape(2), tiles.bq, tiles.bk};
    inputs.push_back(cached_mask_visits(mask, grid, call.stream));
  }
  return array(
      output_shape(inputs),
      inputs[0].dtype(),
      std::make_shared<FusedAttention>(call.stream, plan, inputs),
      inputs);
}

} // namespace mlx_fused_attn
