// CUDA entry point of the short-sequence attention kernel. The body is
// mlx_fused_attn/families/short_attention/short_attention.h, the same one Metal runs; this
// file only declares the shared memory and maps the grid.
//
// Template: element type, head dim and the tiles (a type whose `value` is a
// ShortAttnTiles, kernel_tiles.h). The features arrive at run time: each
// decides once per row group, so specialising them would only multiply the
// instances that nvcc and NVRTC build.
//
// Grid: ceil(B * H_q / problems) blocks; block: warps * 32 threads; dynamic
// shared memory: short_attention_smem_bytes(tiles, D, dtype).
#pragma once

#include "mlx_fused_attn/families/short_attention/short_attention_tiles_of.h"
#include "mlx_fused_attn/families/short_attention/short_attention.h"
#include "mlx_fused_attn/families/short_attention/short_attention_features.h"
#include "mlx_fused_attn/params.h"
#include "mlx_fused_attn/tile/cuda_target.h"

namespace fa {

template <typename T, int D, typename Tiles>
__global__ void __launch_bounds__(Tiles::value.warps * kSimdWidth)
    short_attention_kernel(
    const T* q,
    const T* k,
    const T* v,
    T* out,
    const AttnParams params,
    const unsigned char* mask,
    const T* sinks,
    ShortAttnFeatures features) {
  constexpr ShortAttnTiles t = Tiles::value;
  typedef ShortShape<T, D, t.seq, t.warp_rows, t.warps, t.problems> Shape;
  extern __shared__ __align__(16) unsigned char smem[];
  const AttnArrays<T> arrays = {
      q, k, v, out, mask, sinks, nullptr, nullptr, nullptr, nullptr, nullptr};
  short_attention_block<CudaTarget, Shape>(
      arrays, params, reinterpret_cast<T*>(smem), features, blockIdx.x,
      threadIdx.x / kSimdWidth, threadIdx.x % kSimdWidth);
}

} // namespace fa
