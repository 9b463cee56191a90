// CUDA entry point of the fused neighborhood-attention kernel. The body is
// mlx_fused_attn/kernels/na_attention.h, the same one Metal runs; this file
// makes the shared geometry (na_window.h, na_grid.h) device code, declares
// the shared memory and maps the grid.
//
// Template: element type, head dim, tiles (a type whose `value` is the
// fa::NaTiles, kernel_tiles.h; wgmma: warpgroup products, CudaWgmmaTarget)
// and the number of spatial axes.
//
// Grid: (grid.blocks, H, B); block: warps * 32 threads; dynamic shared
// memory: na_smem_bytes(tiles, D, dtype, N).
#pragma once

#define FA_HOST_DEVICE __host__ __device__ inline

#include "mlx_fused_attn/backend/cuda/kernel_tiles.h"
#include "mlx_fused_attn/kernels/na_attention.h"
#include "mlx_fused_attn/kernels/na_config.h"
#include "mlx_fused_attn/kernels/na_grid.h"
#include "mlx_fused_attn/na_params.h"
#include "mlx_fused_attn/tile/cuda_target.h"
#include "mlx_fused_attn/tile/dtype_of.h"

namespace fa {

/// Whether the shared memory the host gives an instance (na_smem_bytes) is
/// exactly that of its K and V stages and key coordinates. A variable, so
/// that the host function is evaluated outside the kernel.
template <typename T, int D, typename Tiles, int N, typename Block>
constexpr bool kNaSmemBytesAgree =
    na_smem_bytes(Tiles::value, D, DTypeOf<T>::value, N) ==
    int(sizeof(T)) * 2 * Tiles::value.stages * Block::kElems +
        4 * na_coord_ints(Tiles::value, N);

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
  // As in attention_kernel.cuh: the host launches a warpgroup-product
  // instance only on sm_90a.
  constexpr auto t = Tiles::value;
  if constexpr (t.wgmma && !FA_HAS_WGMMA) {
    __trap();
  } else {
    typedef AttnShape<T, D, t.warp_rows * t.warps, t.key_block, t.warps, t.stages>
        Shape;
    typedef typename CudaTargetOf<t.wgmma, false>::type Target;
    typedef AttnKBlock<Target, Shape> Block;
    static_assert(
        kNaSmemBytesAgree<T, D, Tiles, N, Block>,
        "na_smem_bytes disagrees with the kernel's blocks");
    // 1024 bytes: the swizzled blocks' pattern is anchored to address bits.
    extern __shared__ __align__(1024) unsigned char na_smem[];
    T* k_smem = reinterpret_cast<T*>(na_smem);
    T* v_smem = k_smem + t.stages * Block::kElems;
    int* coords = reinterpret_cast<int*>(v_smem + t.stages * Block::kElems);

    na_attention_block<Target, Shape, N>(
        q,
        k,
        v,
        out,
        params,
        grid,
        k_smem,
        v_smem,
        coords,
        blockIdx.x,
        blockIdx.y,
        blockIdx.z,
        threadIdx.x / kSimdWidth,
        threadIdx.x % kSimdWidth);
  }
}

} // namespace fa
