#include "mlx_fused_attn/op/mask_and_sinks.h"

#include "mlx/ops.h"
#include "mlx_fused_attn/op/errors.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

void add_array_mask(
    const char* op,
    const char* dtype_of,
    const array& m,
    const Shape& full,
    Dtype dt,
    AttentionSpec& spec,
    std::vector<array>& inputs,
    Stream s) {
  if (m.ndim() > 4) {
    throw std::invalid_argument(op_message(
        op, "mask must have rank at most 4; got shape ", m.shape()));
  }
  for (int i = 1; i <= static_cast<int>(m.ndim()); ++i) {
    int have = m.shape(-i), want = full[4 - i];
    if (have != want && have != 1) {
      throw std::invalid_argument(op_message(
          op, "mask of shape ", m.shape(), " does not broadcast to ", full));
    }
  }
  spec.mask_shared_by_heads = m.ndim() < 3 || m.shape(-3) == 1;
  spec.mask_shared_by_batch = m.ndim() < 4 || m.shape(-4) == 1;
  if (m.dtype() == bool_) {
    spec.mask = MaskKind::Bool;
    inputs.push_back(broadcast_to(m, full, s));
  } else if (promote_types(m.dtype(), dt) == dt) {
    // Integer masks are additive after promotion, as in mx.fast.
    spec.mask = MaskKind::Additive;
    inputs.push_back(broadcast_to(astype(m, dt, s), full, s));
  } else {
    throw std::invalid_argument(op_message(
        op, "mask must be bool or a type that promotes to ", dt,
        " (the dtype of ", dtype_of, "), such as ", dt,
        " or an integer type; got ",
        m.dtype()));
  }
}

} // namespace

void add_mask(
    const char* op,
    const char* dtype_of,
    const Mask& mask,
    const Shape& full,
    Dtype dt,
    AttentionSpec& spec,
    std::vector<array>& inputs,
    Stream s) {
  if (const auto* mode = std::get_if<std::string>(&mask)) {
    if (*mode != "causal") {
      throw std::invalid_argument(op_message(
          op, "mask must be None, \"causal\" or an array; got the string \"",
          *mode, "\""));
    }
    spec.mask = MaskKind::Causal;
  } else if (const auto* m = std::get_if<array>(&mask)) {
    add_array_mask(op, dtype_of, *m, full, dt, spec, inputs, s);
  }
}

array checked_sinks(
    const char* op,
    const char* dtype_of,
    const array& sinks,
    int H_q,
    Dtype dt,
    Stream s) {
  if (sinks.ndim() != 1 || sinks.shape(0) != H_q) {
    throw std::invalid_argument(op_message(
        op, "sinks must have shape [", H_q, "] (one per query head); got ",
        sinks.shape()));
  }
  // bool and integer sinks promote, as in mx.fast.
  if (promote_types(sinks.dtype(), dt) != dt) {
    throw std::invalid_argument(op_message(
        op, "sinks must have a type that promotes to ", dt,
        " (the dtype of ", dtype_of, "), such as ", dt,
        ", bool or an integer type; got ", sinks.dtype()));
  }
  return astype(sinks, dt, s);
}

} // namespace mlx_fused_attn
