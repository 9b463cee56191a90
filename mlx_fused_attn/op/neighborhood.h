// Neighborhood attention (NATTEN's na1d / na2d / na3d semantics, see
// na_window.h): each token attends to a window of tokens around it.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mlx/array.h"
#include "mlx/utils.h"

namespace mlx_fused_attn {

/// q, k [B, *spatial, H, D], v [B, *spatial, H, D_v] with 1 to 3 spatial
/// axes (heads last, as NATTEN). kernel_size, dilation and is_causal hold one
/// value for every axis or one per axis. scale defaults to D ** -0.5.
mlx::core::array neighborhood_attention(
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    const std::vector<int>& kernel_size,
    const std::vector<int>& dilation = {1},
    const std::vector<bool>& is_causal = {false},
    std::optional<float> scale = std::nullopt,
    mlx::core::StreamOrDevice s = {});

/// Whether the call above runs a fused kernel, and if not why.
std::pair<bool, std::string> neighborhood_can_use_fused(
    const mlx::core::array& q,
    const mlx::core::array& k,
    const mlx::core::array& v,
    const std::vector<int>& kernel_size,
    const std::vector<int>& dilation = {1},
    const std::vector<bool>& is_causal = {false},
    std::optional<float> scale = std::nullopt,
    mlx::core::StreamOrDevice s = {});

} // namespace mlx_fused_attn
