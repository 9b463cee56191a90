// CUDA entry point of the fused neighborhood-attention kernel. The body is
// mlx_fused_attn/families/neighborhood/na_attention.h, the same one Metal runs; this file
// makes the shared geometry (na_window.h, na_grid.h) device code, declares
// the shared memory and maps the grid.
//
// Template: element type, head dim, tiles (a type whose `value` is the
// fa::NaTiles, kernel_tiles.h) and the number of spatial axes.
//
// Grid: (grid.blocks, H, B); block: warps * 32 threads; dynamic shared
// memory: na_smem_bytes(tiles, D, dtype, N).
#pragma once

#define FA_HOST_DEVICE __host__ __device__ inline

#include "mlx_fused_attn/families/neighborhood/na_tiles_of.h"
#include "mlx_fused_attn/families/neighborhood/na_attention.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/families/neighborhood/na_grid.h"
#include "mlx_fused_attn/families/neighborhood/na_params.h"
#include "mlx_fused_attn/tile/cuda_target.h"

namespace fa {

template <typename T, int D, typename Tiles, int N>
__global__ void __launch_bounds__(
    Tiles::value.warps * kSimdWidth,
    Tiles::value.min_blocks) na_attention_kernel(
    const T* q,
    const T* k,
    const T* v,
    T* out,
    const NaParams params,
    const NaGrid grid) {
  constexpr auto t = Tiles::value;
  typedef AttnShape<T, D, t.warp_rows * t.warps, t.key_block, t.warps, t.stages>
      Shape;
  extern __shared__ __align__(16) unsigned char smem[];
  T* k_smem = reinterpret_cast<T*>(smem);
  T* v_smem = k_smem + Shape::kSmemElems;
  int* coords = reinterpret_cast<int*>(v_smem + Shape::kSmemElems);

  const NaArrays<T> arrays = {q, k, v, out};
  const NaSmem<T> stages = {k_smem, v_smem, coords};
  const NaPlace place = {
      int(blockIdx.x), int(blockIdx.y), int(blockIdx.z)};
  na_attention_block<CudaTarget, Shape, N>(
      arrays, params, grid, stages, place, threadIdx.x / kSimdWidth,
      threadIdx.x % kSimdWidth);
}

} // namespace fa
