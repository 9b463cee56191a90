#include "mlx_fused_attn/op/fused_primitive.h"

#include "mlx/ops.h"
#include "mlx/transforms.h"

namespace mlx_fused_attn {

using namespace mlx::core;

std::vector<array> vmap_by_folding(
    const Definitions& apply,
    const Definitions& plain,
    const std::vector<array>& inputs,
    const std::vector<int>& axes,
    const std::vector<bool>& batched,
    Stream s) {
  int n = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) {
      n = inputs[i].shape(axes[i]);
      break;
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!batched[i] && axes[i] >= 0) {
      // An input without a batch axis (attention sinks) that varies along
      // the mapped axis would need a different value per folded batch.
      return mlx::core::vmap(plain, axes)(inputs);
    }
  }
  std::vector<array> folded;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array x = inputs[i];
    if (!batched[i]) {
      folded.push_back(x);
      continue;
    }
    if (axes[i] >= 0) {
      x = moveaxis(x, axes[i], 0, s);
    } else {
      Shape shape = x.shape();
      shape.insert(shape.begin(), n);
      x = broadcast_to(expand_dims(x, 0, s), shape, s);
    }
    Shape shape(x.shape().begin() + 1, x.shape().end());
    shape[0] *= n;
    folded.push_back(reshape(x, shape, s));
  }
  std::vector<array> outs;
  for (const array& out : apply(folded)) {
    Shape shape = out.shape();
    shape[0] /= n;
    shape.insert(shape.begin(), n);
    outs.push_back(reshape(out, shape, s));
  }
  return outs;
}

} // namespace mlx_fused_attn
