// The short-sequence kernel on CUDA (short_attention_kernel.cuh): whether
// it takes a call, and its launch. attention_cuda.cpp asks first and hands
// the call over, after preparing the inputs and the parameters it shares
// with the general kernel.
#pragma once

#include <optional>
#include <vector>

#include "mlx/array.h"
#include "mlx/backend/cuda/device.h"
#include "mlx_fused_attn/kernels/short_attention_config.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/spec.h"

namespace mlx_fused_attn::cuda {

/// The short kernel's tiles when it runs this call, else nothing: when it is
/// enabled (short_attention_enabled), covers the call (short_attention_covers
/// on inputs {q, k, v, ...} of kernel dtype `dtype`) and its shared memory
/// fits one block of `device`.
std::optional<fa::ShortAttnTiles> short_attention_tiles_cuda(
    const std::vector<mlx::core::array>& inputs,
    fa::DType dtype,
    int device);

/// Adds the short kernel to the encoder's graph. The caller has registered
/// every array with the encoder; q, k, v have 16-byte aligned rows, as
/// cp.async needs, and `params` describes them and `out`.
/// Whether the short kernel for these tiles loads and takes its launch.
Support short_attention_ready(
    fa::DType dtype,
    fa::ShortAttnTiles tiles,
    int head_dim,
    int device,
    int arch);

void launch_short_attention(
    mlx::core::cu::CommandEncoder& enc,
    const AttentionSpec& spec,
    fa::DType dtype,
    fa::ShortAttnTiles tiles,
    fa::AttnParams params,
    const void* q,
    const void* k,
    const void* v,
    void* out,
    const void* mask,
    const void* sinks,
    int device,
    int arch);

} // namespace mlx_fused_attn::cuda
