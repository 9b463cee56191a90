#include "mlx_fused_attn/op/transforms.h"

#include "mlx/ops.h"
#include "mlx/transforms.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

// Bool masks and int32 visit lists carry no derivative.
bool differentiable(const array& x) {
  return issubdtype(x.dtype(), inexact);
}

// `def` as a function of the inputs listed in `varying` alone, the others
// held at their primal values.
Definitions restrict_to(
    const Definitions& def,
    const std::vector<array>& primals,
    const std::vector<int>& varying) {
  return [=](const std::vector<array>& values) {
    std::vector<array> inputs = primals;
    for (size_t i = 0; i < varying.size(); ++i) {
      inputs[varying[i]] = values[i];
    }
    return def(inputs);
  };
}

Definitions as_definitions(const Definition& def) {
  return [def](const std::vector<array>& inputs) {
    return std::vector<array>{def(inputs)};
  };
}

} // namespace

std::vector<array> vjp_through(
    const Definitions& def,
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums) {
  std::vector<int> varying;
  std::vector<array> values;
  for (int a : argnums) {
    if (differentiable(primals[a])) {
      varying.push_back(a);
      values.push_back(primals[a]);
    }
  }
  std::vector<array> grads;
  if (!varying.empty()) {
    grads = vjp(restrict_to(def, primals, varying), values, cotangents).second;
  }
  std::vector<array> out;
  for (size_t i = 0, j = 0; i < argnums.size(); ++i) {
    const array& p = primals[argnums[i]];
    out.push_back(differentiable(p) ? std::move(grads[j++]) : zeros_like(p));
  }
  return out;
}

std::vector<array> jvp_through(
    const Definitions& def,
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  std::vector<int> varying;
  std::vector<array> values, dirs;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (differentiable(primals[argnums[i]])) {
      varying.push_back(argnums[i]);
      values.push_back(primals[argnums[i]]);
      dirs.push_back(tangents[i]);
    }
  }
  if (varying.empty()) {
    std::vector<array> zeros;
    for (const array& out : def(primals)) {
      zeros.push_back(zeros_like(out));
    }
    return zeros;
  }
  return jvp(restrict_to(def, primals, varying), values, dirs).second;
}

std::vector<array> vjp_through(
    const Definition& def,
    const std::vector<array>& primals,
    const std::vector<array>& cotangents,
    const std::vector<int>& argnums) {
  return vjp_through(as_definitions(def), primals, cotangents, argnums);
}

std::vector<array> jvp_through(
    const Definition& def,
    const std::vector<array>& primals,
    const std::vector<array>& tangents,
    const std::vector<int>& argnums) {
  return jvp_through(as_definitions(def), primals, tangents, argnums);
}

} // namespace mlx_fused_attn
