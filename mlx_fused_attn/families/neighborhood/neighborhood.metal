// Metal entry point of the fused neighborhood-attention kernel and its
// instantiation list. The body is mlx_fused_attn/families/neighborhood/na_attention.h;
// this file binds buffers, declares the threadgroup memory, and names one
// kernel per (axes, dtype, head dim) with the tiles choose_na_tiles picks.
//
// Buffers: 0 q, 1 k, 2 v, 3 out ([B, *spatial, H, D], strides in params),
// 4 params (fa::NaParams), 5 grid (fa::NaGrid). Grid: (grid.blocks, H, B);
// threadgroup: (32, warps, 1).

#include "mlx_fused_attn/families/neighborhood/na_attention.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/tile/dtype_of.h"
#include "mlx_fused_attn/tile/metal_target.h"

using namespace metal;

template <typename T, int D, int BQ, int BK, int WM, int N>
[[kernel, max_total_threads_per_threadgroup(WM* fa::kSimdWidth)]] void
fa_neighborhood(
    const device T* q [[buffer(0)]],
    const device T* k [[buffer(1)]],
    const device T* v [[buffer(2)]],
    device T* out [[buffer(3)]],
    constant fa::NaParams& params [[buffer(4)]],
    constant fa::NaGrid& grid [[buffer(5)]],
    uint3 tgid [[threadgroup_position_in_grid]],
    uint warp [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]]) {
  // Metal's loads are plain (synchronous) loads: one K/V stage.
  constexpr fa::NaTiles tiles = {BQ / WM, BK, WM, 1};
  static_assert(
      tiles ==
          fa::choose_na_tiles(
              D, fa::DTypeOf<T>::value, fa::Backend::Metal, N),
      "instantiation list disagrees with choose_na_tiles");
  typedef fa::AttnShape<T, D, BQ, BK, WM, tiles.stages> Shape;
  // 1-D keeps no key coordinates; Metal has no zero-length arrays.
  constexpr int kCoordInts = fa::na_coord_ints(tiles, N);

  FA_SHARED_ARRAY_DECL T k_smem[Shape::kSmemElems];
  FA_SHARED_ARRAY_DECL T v_smem[Shape::kSmemElems];
  FA_SHARED_ARRAY_DECL int coords[kCoordInts > 0 ? kCoordInts : 1];
  static_assert(
      sizeof(k_smem) + sizeof(v_smem) + sizeof(coords) <=
          fa::kMetalMaxThreadgroupBytes,
      "threadgroup arrays over Metal's threadgroup memory");

  const fa::NaArrays<T> arrays = {q, k, v, out};
  const fa::NaSmem<T> smem = {k_smem, v_smem, coords};
  const fa::NaPlace place = {int(tgid.x), int(tgid.y), int(tgid.z)};
  fa::na_attention_block<fa::MetalTarget, Shape, N>(
      arrays, params, grid, smem, place, warp, lane);
}

// Names must match na_kernel_name() in
// mlx_fused_attn/families/neighborhood/na_kernel_name.h (a test compares them).
#define FA_NA_INSTANTIATE(tname, T, D, BQ, BK, WM, N)             \
  template [[host_name(                                           \
      "fa_na" #N "d_" #tname "_d" #D "_bq" #BQ "_bk" #BK "_wm" #WM)]] \
  [[kernel]] decltype(fa_neighborhood<T, D, BQ, BK, WM, N>)       \
      fa_neighborhood<T, D, BQ, BK, WM, N>;

// One kernel per axis count, dtype and head dim of FA_NA_HEAD_DIMS
// (na_config.h), with the Metal tiles choose_na_tiles gives.
// BEGIN INSTANCES (tools/gen_instances.py; do not edit)
FA_NA_INSTANTIATE(float16, half, 32, 64, 32, 8, 1)
FA_NA_INSTANTIATE(float16, half, 64, 64, 32, 8, 1)
FA_NA_INSTANTIATE(float16, half, 128, 64, 16, 8, 1)
FA_NA_INSTANTIATE(bfloat16, bfloat, 32, 64, 32, 8, 1)
FA_NA_INSTANTIATE(bfloat16, bfloat, 64, 64, 32, 8, 1)
FA_NA_INSTANTIATE(bfloat16, bfloat, 128, 64, 16, 8, 1)
FA_NA_INSTANTIATE(float32, float, 32, 64, 32, 8, 1)
FA_NA_INSTANTIATE(float32, float, 64, 64, 32, 8, 1)
FA_NA_INSTANTIATE(float32, float, 128, 64, 16, 8, 1)
FA_NA_INSTANTIATE(float16, half, 32, 64, 32, 8, 2)
FA_NA_INSTANTIATE(float16, half, 64, 64, 32, 8, 2)
FA_NA_INSTANTIATE(float16, half, 128, 64, 16, 8, 2)
FA_NA_INSTANTIATE(bfloat16, bfloat, 32, 64, 32, 8, 2)
FA_NA_INSTANTIATE(bfloat16, bfloat, 64, 64, 32, 8, 2)
FA_NA_INSTANTIATE(bfloat16, bfloat, 128, 64, 16, 8, 2)
FA_NA_INSTANTIATE(float32, float, 32, 64, 32, 8, 2)
FA_NA_INSTANTIATE(float32, float, 64, 64, 32, 8, 2)
FA_NA_INSTANTIATE(float32, float, 128, 64, 16, 8, 2)
FA_NA_INSTANTIATE(float16, half, 32, 64, 32, 8, 3)
FA_NA_INSTANTIATE(float16, half, 64, 64, 32, 8, 3)
FA_NA_INSTANTIATE(float16, half, 128, 64, 16, 8, 3)
FA_NA_INSTANTIATE(bfloat16, bfloat, 32, 64, 32, 8, 3)
FA_NA_INSTANTIATE(bfloat16, bfloat, 64, 64, 32, 8, 3)
FA_NA_INSTANTIATE(bfloat16, bfloat, 128, 64, 16, 8, 3)
FA_NA_INSTANTIATE(float32, float, 32, 64, 32, 8, 3)
FA_NA_INSTANTIATE(float32, float, 64, 64, 32, 8, 3)
FA_NA_INSTANTIATE(float32, float, 128, 64, 16, 8, 3)
// END INSTANCES
