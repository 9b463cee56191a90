#include "mlx_fused_attn/backend/cuda/short_attention_cuda.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "mlx_fused_attn/backend/cuda/device_limits.h"
#include "mlx_fused_attn/backend/cuda/kernels.h"
#include "mlx_fused_attn/backend/short_attention_switch.h"
#include "mlx_fused_attn/kernels/short_attention_features.h"

namespace mlx_fused_attn::cuda {

namespace mx = mlx::core;

Support short_attention_ready(
    fa::DType dtype,
    fa::ShortAttnTiles tiles,
    int head_dim,
    int device,
    int arch) {
  return kernel_ready(
      ShortAttentionKernelKey{dtype, head_dim, tiles.seq}, device, arch);
}

std::optional<fa::ShortAttnTiles> short_attention_tiles_cuda(
    const std::vector<mx::array>& inputs,
    fa::DType dtype,
    int device) {
  const mx::array& q = inputs[0];
  const int L_q = q.shape(2);
  const int L_k = inputs[1].shape(2);
  const int D = q.shape(3);
  // The kernel numbers sequences with an int, and the grid is one axis.
  const int64_t sequences = int64_t(q.shape(0)) * q.shape(1);
  if (!short_attention_enabled() ||
      !fa::short_attention_covers(
          L_q, L_k, D, inputs[2].shape(3), dtype, fa::Backend::Cuda) ||
      sequences > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  const fa::ShortAttnTiles tiles = fa::choose_short_attention_tiles(
      D, dtype, fa::Backend::Cuda, fa::short_attention_seq(L_q, L_k));
  if (fa::short_attention_smem_bytes(tiles, D, dtype) >
      max_smem_per_block(device)) {
    return std::nullopt;
  }
  return tiles;
}

void launch_short_attention(
    mx::cu::CommandEncoder& enc,
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
    int arch) {
  fa::ShortAttnFeatures features{};
  features.has_mask =
      spec.mask == MaskKind::Bool || spec.mask == MaskKind::Additive;
  features.bool_mask = spec.mask == MaskKind::Bool;
  features.causal = spec.mask == MaskKind::Causal;
  features.has_sinks = spec.has_sinks;

  const ShortAttentionKernelKey key{dtype, params.D, tiles.seq};
  const int64_t sequences = int64_t(params.B) * params.H_q;
  const dim3 grid(
      static_cast<unsigned>((sequences + tiles.problems - 1) / tiles.problems));
  enc.add_kernel_node_ex(
      kernel_function(key, device, arch),
      grid,
      dim3(key.threads()),
      {},
      static_cast<uint32_t>(key.smem_bytes()),
      q,
      k,
      v,
      out,
      params,
      mask,
      sinks,
      features);
}

} // namespace mlx_fused_attn::cuda
