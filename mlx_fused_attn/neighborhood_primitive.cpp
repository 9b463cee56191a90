#include "mlx_fused_attn/neighborhood_primitive.h"

#include "mlx/transforms.h"
#include "mlx_fused_attn/backend/cpu/na_cpu.h"
#include "mlx_fused_attn/backend/gpu_na.h"

namespace mlx_fused_attn {

using namespace mlx::core;

void NeighborhoodAttention::eval_cpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  cpu::neighborhood(spec_, inputs, outputs[0], stream());
}

void NeighborhoodAttention::eval_gpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  gpu::na_eval(spec_, inputs, outputs[0], stream());
}

Definition NeighborhoodAttention::definition() {
  return [spec = spec_, s = stream()](const std::vector<array>& in) {
    return neighborhood_fallback(spec, in, s);
  };
}

std::vector<array> NeighborhoodAttention::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  return vjp_through(definition(), primals, cotangents, argnums);
}

std::vector<array> NeighborhoodAttention::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  return jvp_through(definition(), primals, tangents, argnums);
}

std::pair<std::vector<array>, std::vector<int>> NeighborhoodAttention::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  auto def = definition();
  auto fun = [def](const std::vector<array>& in) {
    return std::vector<array>{def(in)};
  };
  return {mlx::core::vmap(fun, axes, {0})(inputs), {0}};
}

std::vector<Shape> NeighborhoodAttention::output_shapes(
    const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  shape.back() = inputs[2].shape().back();
  return {shape};
}

bool NeighborhoodAttention::is_equivalent(const Primitive& other) const {
  const auto& o = static_cast<const NeighborhoodAttention&>(other);
  if (spec_.n_axes != o.spec_.n_axes || spec_.scale != o.spec_.scale) {
    return false;
  }
  for (int a = 0; a < fa::kNaMaxAxes; ++a) {
    const fa::NaAxis &x = spec_.axes[a], &y = o.spec_.axes[a];
    if (x.n != y.n || x.k != y.k || x.d != y.d || x.causal != y.causal) {
      return false;
    }
  }
  return true;
}

} // namespace mlx_fused_attn
