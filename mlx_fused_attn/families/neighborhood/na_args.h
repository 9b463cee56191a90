// The arguments of the neighborhood body (na_attention.h), gathered once in
// each entry point (mlx_fused_attn/families/neighborhood/neighborhood.metal, families/neighborhood/na_kernel.cuh)
// and read by name: the arrays, the threadgroup memory and where in the
// grid a threadgroup works. Every pointer names its address space, as Metal
// requires of a pointer in a struct (attention_args.h).
#pragma once

#include "mlx_fused_attn/tile/language.h"

namespace fa {

/// q, k, v and the output, [B, *spatial, H, D] with the strides of
/// NaParams.
template <typename T>
struct NaArrays {
  const FA_DEVICE T* q;
  const FA_DEVICE T* k;
  const FA_DEVICE T* v;
  FA_DEVICE T* out;
};

/// K's and V's stages, and the key coordinates of the 2-D and 3-D kernels'
/// boxes (na_coord_ints).
template <typename T>
struct NaSmem {
  FA_THREADGROUP T* k;
  FA_THREADGROUP T* v;
  FA_THREADGROUP int* coords;
};

/// Where a threadgroup works: its block of the grid (NaGrid: a tile, or a
/// run of tiles), its head and its batch entry.
struct NaPlace {
  int block;
  int head;
  int batch;
};

} // namespace fa
