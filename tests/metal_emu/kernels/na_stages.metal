// The neighborhood kernel body (mlx_fused_attn/families/neighborhood/na_attention.h) with
// CUDA's pipeline: several K/V stages (a ring of blocks in threadgroup
// memory, with their key coordinates, or a whole key box resident) and
// 32-key blocks under 8 warps. The Metal entry point runs one stage; this
// one lets the emulator check the ring's indexing and barriers, and the
// resident box's single barrier, and 1-D runs of tiles through a ring of
// stages, which on CUDA only a GPU would exercise. The `_pg4` instances run
// the per-warp products with warps in groups of four that skip key blocks
// together, as Hopper's warpgroup products require (swizzled_block.h).
// Buffers and grid as mlx_fused_attn/families/neighborhood/neighborhood.metal.
#include "mlx_fused_attn/families/neighborhood/na_attention.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/tile/metal_target.h"

using namespace metal;

/// Metal's blocks, their products called by warps in groups of four.
struct GroupedProductTarget : fa::MetalTarget {
  template <typename T, int kRows, int kCols, int kSrcCols, int kThreads>
  struct KVBlock
      : fa::PaddedBlock<fa::MetalTarget, T, kRows, kCols, kSrcCols, kThreads> {
    FA_CONST int kProductWarps = 4;
  };
};

template <typename Target, typename T, int D, int BQ, int BK, int WM, int ST, int N>
[[kernel]] void na_stages(
    const device T* q [[buffer(0)]],
    const device T* k [[buffer(1)]],
    const device T* v [[buffer(2)]],
    device T* out [[buffer(3)]],
    constant fa::NaParams& params [[buffer(4)]],
    constant fa::NaGrid& grid [[buffer(5)]],
    uint3 tgid [[threadgroup_position_in_grid]],
    uint warp [[simdgroup_index_in_threadgroup]],
    uint lane [[thread_index_in_simdgroup]]) {
  typedef fa::AttnShape<T, D, BQ, BK, WM, ST> Shape;
  constexpr int kCoordInts =
      fa::na_coord_ints(fa::NaTiles{BQ / WM, BK, WM, ST}, N);
  FA_SHARED_ARRAY_DECL T k_smem[Shape::kSmemElems];
  FA_SHARED_ARRAY_DECL T v_smem[Shape::kSmemElems];
  FA_SHARED_ARRAY_DECL int coords[kCoordInts > 0 ? kCoordInts : 1];
  const fa::NaArrays<T> arrays = {q, k, v, out};
  const fa::NaSmem<T> smem = {k_smem, v_smem, coords};
  const fa::NaPlace place = {int(tgid.x), int(tgid.y), int(tgid.z)};
  fa::na_attention_block<Target, Shape, N>(
      arrays, params, grid, smem, place, warp, lane);
}

#define NA_STAGES_OF(Target, suffix, tname, T, D, ST, N)                     \
  template [[host_name(                                                      \
      "fa_na" #N "d_" #tname "_d" #D "_bq64_bk32_wm8_st" #ST suffix)]]        \
  [[kernel]] decltype(na_stages<Target, T, D, 64, 32, 8, ST, N>)             \
      na_stages<Target, T, D, 64, 32, 8, ST, N>;
#define NA_STAGES(tname, T, D, ST, N) \
  NA_STAGES_OF(fa::MetalTarget, "", tname, T, D, ST, N)
#define NA_GROUPED(tname, T, D, ST, N) \
  NA_STAGES_OF(GroupedProductTarget, "_pg4", tname, T, D, ST, N)

NA_STAGES(float16, half, 64, 3, 1)
NA_STAGES(float16, half, 64, 4, 1)
NA_STAGES(float16, half, 64, 3, 2)
NA_STAGES(float16, half, 64, 6, 1)
NA_STAGES(float16, half, 64, 6, 2)
NA_STAGES(float32, float, 32, 2, 3)
NA_GROUPED(float16, half, 64, 6, 1)
NA_GROUPED(float16, half, 64, 3, 2)
NA_GROUPED(float32, float, 32, 2, 3)
