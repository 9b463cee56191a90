#include "mlx_fused_attn/op/quantized_attention.h"

#include "mlx/ops.h"
#include "mlx_fused_attn/op/call_plans.h"
#include "mlx_fused_attn/op/errors.h"
#include "mlx_fused_attn/op/quantized_fallback.h"
#include "mlx_fused_attn/op/quantized_primitive.h"
#include "mlx_fused_attn/op/runs_fused.h"

namespace mlx_fused_attn {

using namespace mlx::core;

namespace {

constexpr const char* kOp = "quantized_scaled_dot_product_attention";
constexpr const char* kDtypeOf = "queries and the scales and biases";

template <typename... Parts>
std::string message(const Parts&... parts) {
  return op_message(kOp, parts...);
}

void check_quantization(int group_size, int bits) {
  if (bits != 2 && bits != 3 && bits != 4 && bits != 5 && bits != 6 &&
      bits != 8) {
    throw std::invalid_argument(message(
        "bits must be 2, 3, 4, 5, 6 or 8 (mx.quantize's affine widths); got ",
        bits));
  }
  if (group_size != 32 && group_size != 64 && group_size != 128) {
    throw std::invalid_argument(message(
        "group_size must be 32, 64 or 128; got ", group_size));
  }
}

/// Checks one of q_keys, q_values (named `name`) against mx.quantize's affine
/// layout with `group_size` and `bits`; returns its head dim.
int check_quantized(
    const char* name,
    const QuantizedKv& x,
    int group_size,
    int bits) {
  const array* parts[] = {&x.words, &x.scales, &x.biases};
  for (int i = 0; i < 3; ++i) {
    if (parts[i]->ndim() != 4) {
      throw std::invalid_argument(message(
          name, "[", i, "] must have rank 4 [B, H_kv, L_k, ...]; got shape ",
          parts[i]->shape()));
    }
  }
  if (x.words.dtype() != uint32) {
    throw TypeError(message(
        name, "[0] must hold the packed codes, uint32 (as mx.quantize returns "
        "them); got ", x.words.dtype()));
  }
  for (int i = 1; i < 3; ++i) {
    if (!issubdtype(parts[i]->dtype(), floating)) {
      throw TypeError(message(
          name, "[", i, "] must be floating-point (the ",
          i == 1 ? "scales" : "biases", "); got ", parts[i]->dtype()));
    }
  }
  if (x.scales.shape() != x.biases.shape()) {
    throw std::invalid_argument(message(
        name, "'s scales and biases must have one shape; got ",
        x.scales.shape(), " and ", x.biases.shape()));
  }
  for (int a = 0; a < 3; ++a) {
    if (x.scales.shape(a) != x.words.shape(a)) {
      throw std::invalid_argument(message(
          name, "'s codes ", x.words.shape(), " and scales ", x.scales.shape(),
          " must agree on [B, H_kv, L_k]"));
    }
  }
  const int64_t codes = int64_t(x.words.shape(3)) * 32;
  if (codes % bits != 0 || (codes / bits) % group_size != 0 ||
      codes / bits / group_size != x.scales.shape(3)) {
    throw std::invalid_argument(message(
        name, " does not hold rows quantized with group_size=", group_size,
        " and bits=", bits, ": ", x.words.shape(3), " words a row and ",
        x.scales.shape(3), " scales a row (pass the group_size and bits the "
        "cache was quantized with)"));
  }
  return static_cast<int>(codes / bits);
}

QuantizedAttentionCall validate(
    const array& queries,
    const QuantizedKv& keys,
    const QuantizedKv& values,
    float scale,
    const Mask& mask,
    int group_size,
    int bits,
    const std::optional<array>& sinks,
    StreamOrDevice sd) {
  check_quantization(group_size, bits);
  if (queries.ndim() != 4) {
    throw std::invalid_argument(message(
        "queries must have rank 4 [B, H_q, L_q, D]; got shape ",
        queries.shape()));
  }
  if (!issubdtype(queries.dtype(), floating)) {
    throw TypeError(message(
        "queries must be floating-point (float16, bfloat16, float32); got ",
        queries.dtype()));
  }
  check_scale(kOp, scale);
  const int D_k = check_quantized("q_keys", keys, group_size, bits);
  check_quantized("q_values", values, group_size, bits);
  if (D_k != queries.shape(3)) {
    throw std::invalid_argument(message(
        "q_keys hold ", D_k, " values a row (with bits=", bits,
        "); queries have head dim ", queries.shape(3)));
  }
  const array &kw = keys.words, &vw = values.words;
  if (kw.shape(0) != queries.shape(0)) {
    throw std::invalid_argument(message(
        "q_keys must have the batch size of queries (", queries.shape(0),
        "); got codes of shape ", kw.shape()));
  }
  if (vw.shape(0) != kw.shape(0) || vw.shape(1) != kw.shape(1) ||
      vw.shape(2) != kw.shape(2)) {
    throw std::invalid_argument(message(
        "q_values must have the batch, heads and length of q_keys ",
        kw.shape(), "; got codes of shape ", vw.shape()));
  }
  check_gqa_heads(kOp, queries.shape(1), kw.shape(1));

  // The output's dtype is that of mlx-lm's quantized matmuls: queries,
  // scales and biases promoted.
  Dtype dt = queries.dtype();
  for (const array* x :
       {&keys.scales, &keys.biases, &values.scales, &values.biases}) {
    dt = promote_types(dt, x->dtype());
  }
  Stream s = to_stream(sd);
  QuantizedAttentionSpec spec{
      {scale, MaskKind::None, sinks.has_value()}, {bits, group_size}};
  std::vector<array> inputs = {
      astype(queries, dt, s),      kw,
      astype(keys.scales, dt, s),  astype(keys.biases, dt, s),
      vw,                          astype(values.scales, dt, s),
      astype(values.biases, dt, s)};
  const Shape full = {
      queries.shape(0), queries.shape(1), queries.shape(2), kw.shape(2)};
  add_mask(kOp, kDtypeOf, mask, full, dt, spec.attention, inputs, s);
  if (sinks) {
    inputs.push_back(
        checked_sinks(kOp, kDtypeOf, *sinks, queries.shape(1), dt, s));
  }
  return {spec, std::move(inputs), s};
}

} // namespace

array quantized_scaled_dot_product_attention(
    const array& queries,
    const QuantizedKv& keys,
    const QuantizedKv& values,
    float scale,
    const Mask& mask,
    int group_size,
    int bits,
    const std::optional<array>& sinks,
    bool force_fused,
    StreamOrDevice s) {
  QuantizedAttentionCall call = validate(
      queries, keys, values, scale, mask, group_size, bits, sinks, s);
  const QuantizedAttentionPlan plan = plan_quantized_attention(call);
  if (runs_fused(kOp, plan, force_fused, call.stream.device)) {
    return fused_quantized_attention(call, plan);
  }
  return quantized_attention_without_gradients(
      call.spec, call.inputs, call.stream);
}

std::pair<bool, std::string> quantized_can_use_fused(
    const array& queries,
    const QuantizedKv& keys,
    const QuantizedKv& values,
    float scale,
    const Mask& mask,
    int group_size,
    int bits,
    const std::optional<array>& sinks,
    StreamOrDevice s) {
  const QuantizedAttentionPlan plan = quantized_attention_plan(
      queries, keys, values, scale, mask, group_size, bits, sinks, s);
  return {plan.fused(), plan.reason};
}

QuantizedAttentionPlan quantized_attention_plan(
    const array& queries,
    const QuantizedKv& keys,
    const QuantizedKv& values,
    float scale,
    const Mask& mask,
    int group_size,
    int bits,
    const std::optional<array>& sinks,
    StreamOrDevice s) {
  return plan_quantized_attention(validate(
      queries, keys, values, scale, mask, group_size, bits, sinks, s));
}

} // namespace mlx_fused_attn
