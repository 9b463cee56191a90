// The tensor maps that a producer warpgroup copies K and V blocks by
// (tile/kv_tma_ring.h): the driver's description of a [B, H, L, D] array,
// made on the host and passed to the kernel as an argument.
#pragma once

#include "mlx/array.h"
#include "mlx/backend/cuda/device.h"
#include "mlx_fused_attn/tile/platform.h"
#include "mlx_fused_attn/tile/tma_map.h"

namespace mlx_fused_attn::cuda {

/// Whether `x` ([B, H, L, D], rows readable in place: rows_readable) can be
/// described by a tensor map as it is: every axis of more than one element
/// steps forward (a broadcast axis, stride 0, cannot).
bool tensor_map_readable(const mlx::core::array& x);

/// `x` as tensor_map_readable, itself or a row-contiguous copy
/// (readable_rows, then contiguous_copy).
mlx::core::array tensor_map_rows(
    const mlx::core::array& x,
    fa::DType dtype,
    mlx::core::Stream s,
    int device,
    int arch);

/// The 4-D map {D, L, H, B} of `x` (tensor_map_readable), whose boxes are
/// one 128-byte panel of columns by `rows` rows, written with the 128-byte
/// swizzle: tile/smem_layout.h's SwizzledRows panel, as the swizzled
/// blocks hold it. Rows past L read as zeros.
fa::TmaMap panel_tensor_map(const mlx::core::array& x, fa::DType dtype, int rows);

} // namespace mlx_fused_attn::cuda
