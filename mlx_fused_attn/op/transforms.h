// Derivatives of a fused primitive, taken through its plain-ops definition:
// the primitives compute fused, and differentiate as the math they fuse.
#pragma once

#include <functional>
#include <vector>

#include "mlx/array.h"

namespace mlx_fused_attn {

/// The primitive's output as plain MLX ops of all its inputs.
using Definition =
    std::function<mlx::core::array(const std::vector<mlx::core::array>&)>;
/// The same for a primitive of several outputs.
using Definitions = std::function<std::vector<mlx::core::array>(
    const std::vector<mlx::core::array>&)>;

/// Primitive::vjp through `def`. Boolean inputs (masks) have zero gradient.
std::vector<mlx::core::array> vjp_through(
    const Definition& def,
    const std::vector<mlx::core::array>& primals,
    const std::vector<mlx::core::array>& cotangents,
    const std::vector<int>& argnums);

/// Primitive::jvp through `def`. Boolean inputs contribute nothing.
std::vector<mlx::core::array> jvp_through(
    const Definition& def,
    const std::vector<mlx::core::array>& primals,
    const std::vector<mlx::core::array>& tangents,
    const std::vector<int>& argnums);

/// The same through a definition of several outputs.
std::vector<mlx::core::array> vjp_through(
    const Definitions& def,
    const std::vector<mlx::core::array>& primals,
    const std::vector<mlx::core::array>& cotangents,
    const std::vector<int>& argnums);
std::vector<mlx::core::array> jvp_through(
    const Definitions& def,
    const std::vector<mlx::core::array>& primals,
    const std::vector<mlx::core::array>& tangents,
    const std::vector<int>& argnums);

} // namespace mlx_fused_attn
