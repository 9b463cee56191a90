// What every CUDA launch of this backend shares, whatever the kernel
// family: the device check, the output poisoning and the copies of inputs
// whose rows a kernel cannot read in place.
#pragma once

#include "mlx/array.h"
#include "mlx/backend/cuda/device.h"
#include "mlx_fused_attn/spec.h"
#include "mlx_fused_attn/tile/platform.h"

namespace mlx_fused_attn::cuda {

/// The device's compute capability as 10 * major + minor.
int arch_of(mlx::core::cu::Device& device);

/// Whether the kernels run on `device` (compute capability 8.0: mma.sync
/// with bf16); the reason starts with `op`.
Support device_supported(const char* op, mlx::core::cu::Device& device);

/// Fills `out` with NaN before the kernel writes it, when poison_outputs().
void poison(
    mlx::core::array& out,
    mlx::core::cu::CommandEncoder& enc,
    int device,
    int arch);

/// Whether a kernel can read `x` in place: unit stride along its last axis,
/// and every row (and every start along the other axes) 16-byte aligned,
/// as cp.async and the fragments' paired loads need.
bool rows_readable(const mlx::core::array& x);

/// A row-contiguous copy of `x`, of any rank, made on the GPU by the
/// strided copy kernel (strided_copy_parts.h), kept alive by the encoder
/// until its graph has run.
mlx::core::array contiguous_copy(
    const mlx::core::array& x,
    fa::DType dtype,
    mlx::core::cu::CommandEncoder& enc,
    int device,
    int arch);

/// `x` as a kernel can read it: itself where its last axis has unit stride
/// and every row (and every start along the other axes) is 16-byte aligned,
/// as cp.async and the fragments' paired loads need; else a copy.
mlx::core::array readable_rows(
    const mlx::core::array& x,
    fa::DType dtype,
    mlx::core::cu::CommandEncoder& enc,
    int device,
    int arch);

} // namespace mlx_fused_attn::cuda
