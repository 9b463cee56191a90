// The mask and sinks arguments, checked as mx.fast checks them, for every op
// that takes them (scaled_dot_product_attention and its quantized twin).
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "mlx/array.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn {

/// None, the string "causal", or a boolean / additive array broadcastable to
/// [B, H_q, L_q, L_k].
using Mask = std::variant<std::monostate, std::string, mlx::core::array>;

/// Checks `mask` against the scores' shape `full` ([B, H_q, L_q, L_k]) and
/// the call's dtype `dt`, that of `dtype_of` (named so in errors); sets `spec`'s mask kind and what an array mask
/// shares, and appends an array mask to `inputs`, broadcast to `full` (as a
/// view; bool, or additive in `dt`). Errors start with "[op] ".
void add_mask(
    const char* op,
    const char* dtype_of,
    const Mask& mask,
    const mlx::core::Shape& full,
    mlx::core::Dtype dt,
    AttentionSpec& spec,
    std::vector<mlx::core::array>& inputs,
    mlx::core::Stream s);

/// Checks the sinks against the query heads `H_q` and `dt`; returns them in
/// `dt`.
mlx::core::array checked_sinks(
    const char* op,
    const char* dtype_of,
    const mlx::core::array& sinks,
    int H_q,
    mlx::core::Dtype dt,
    mlx::core::Stream s);

} // namespace mlx_fused_attn
