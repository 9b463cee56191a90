#include "mlx_fused_attn/primitive.h"

#include "mlx/ops.h"
#include "mlx/transforms.h"
#include "mlx_fused_attn/backend/cpu/attention_cpu.h"
#include "mlx_fused_attn/backend/gpu.h"
#include "mlx_fused_attn/fallback.h"
#include "mlx_fused_attn/support.h"

namespace mlx_fused_attn {

using namespace mlx::core;

array fused_attention(const AttentionCall& call) {
  return array(
      output_shape(call.inputs),
      call.inputs[0].dtype(),
      std::make_shared<FusedAttention>(call.stream, call.spec),
      call.inputs);
}

void FusedAttention::eval_cpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  cpu::attention(spec_, inputs, outputs[0], stream());
}

void FusedAttention::eval_gpu(
    const std::vector<array>& inputs,
    std::vector<array>& outputs) {
  gpu::eval(spec_, inputs, outputs[0], stream());
}

namespace {

// The plain-ops definition as a function of the inputs listed in `argnums`
// alone; the other inputs are held fixed. Transforms of the primitive are
// transforms of this function.
std::function<std::vector<array>(const std::vector<array>&)> definition_of(
    const AttentionSpec& spec,
    const std::vector<array>& primals,
    const std::vector<int>& argnums,
    Stream s) {
  return [=](const std::vector<array>& varying) {
    std::vector<array> inputs = primals;
    for (size_t i = 0; i < argnums.size(); ++i) {
      inputs[argnums[i]] = varying[i];
    }
    return std::vector<array>{attention_fallback(spec, inputs, s)};
  };
}

// A boolean mask has no derivative; every other input is differentiable.
std::vector<int> differentiable(
    const std::vector<array>& primals,
    const std::vector<int>& argnums) {
  std::vector<int> out;
  for (int a : argnums) {
    if (primals[a].dtype() != bool_) {
      out.push_back(a);
    }
  }
  return out;
}

} // namespace

std::vector<array> FusedAttention::vjp(
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums,
    const std::vector<array>&) {
  auto diff = differentiable(primals, argnums);
  std::vector<array> diff_primals;
  for (int a : diff) {
    diff_primals.push_back(primals[a]);
  }
  auto grads =
      mlx::core::vjp(
          definition_of(spec_, primals, diff, stream()), diff_primals, cotangents)
          .second;
  std::vector<array> out;
  for (size_t i = 0, j = 0; i < argnums.size(); ++i) {
    const array& p = primals[argnums[i]];
    out.push_back(
        p.dtype() == bool_ ? zeros_like(p, stream()) : std::move(grads[j++]));
  }
  return out;
}

std::vector<array> FusedAttention::jvp(
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  std::vector<array> diff_primals, diff_tangents;
  std::vector<int> diff;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (primals[argnums[i]].dtype() != bool_) {
      diff.push_back(argnums[i]);
      diff_primals.push_back(primals[argnums[i]]);
      diff_tangents.push_back(tangents[i]);
    }
  }
  if (diff.empty()) {
    return {zeros(output_shape(primals), primals[0].dtype(), stream())};
  }
  return mlx::core::jvp(
             definition_of(spec_, primals, diff, stream()),
             diff_primals,
             diff_tangents)
      .second;
}

std::pair<std::vector<array>, std::vector<int>> FusedAttention::vmap(
    const std::vector<array>& inputs,
    const std::vector<int>& axes) {
  Stream s = stream();
  int n = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) {
      n = inputs[i].shape(axes[i]);
      break;
    }
  }
  const int sinks = sinks_index(spec_);
  if (sinks >= 0 && axes[sinks] >= 0) {
    // Sinks that vary along the mapped axis cannot fold into the batch.
    auto fun = [spec = spec_, s](const std::vector<array>& in) {
      return std::vector<array>{attention_fallback(spec, in, s)};
    };
    return {mlx::core::vmap(fun, axes, {0})(inputs), {0}};
  }
  // Fold the mapped axis into the batch axis: [n, B, ...] -> [n * B, ...].
  std::vector<array> folded;
  for (size_t i = 0; i < inputs.size(); ++i) {
    array x = inputs[i];
    if (static_cast<int>(i) == sinks) {
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
  AttentionCall call{spec_, folded, s};
  array out = fused_support(call).ok ? fused_attention(call)
                                     : attention_fallback(spec_, folded, s);
  Shape shape = out.shape();
  shape[0] /= n;
  shape.insert(shape.begin(), n);
  return {{reshape(out, shape, s)}, {0}};
}

std::vector<Shape> FusedAttention::output_shapes(
    const std::vector<array>& inputs) {
  return {output_shape(inputs)};
}

bool FusedAttention::is_equivalent(const Primitive& other) const {
  const auto& o = static_cast<const FusedAttention&>(other);
  return spec_.scale == o.spec_.scale && spec_.mask == o.spec_.mask &&
      spec_.has_sinks == o.spec_.has_sinks;
}

} // namespace mlx_fused_attn
