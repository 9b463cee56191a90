// The order in which a causal attention grid's threadgroups take their
// blocks, and a masked one's whose blocks are skipped (mlx-lm's causal,
// windowed and padded arrays fall the same way). Under a causal mask a
// block's work falls with its index counted from the heaviest (the
// forward's and dQ's last query blocks see every key, dK/dV's first key
// blocks every query). Taken per (head, batch) row of the grid, every
// row's heavy blocks start after the previous rows' light ones, and the
// last rows' heavy blocks run alone at the end. Dealt heaviest first
// across all rows, the threadgroups running at once would stream the
// blocks of every head and lose L2's reuse of them (measured: a forward of
// 128 heads of 8192 keys 1.6x slower). So the rows go in groups whose
// streamed blocks share L2, each group heaviest first.
#pragma once

#include "mlx_fused_attn/kernels/attention_features.h"
#include "mlx_fused_attn/params.h"

namespace fa {

/// The streamed bytes that a group of rows may share in L2: a third of an
/// A100's or H100's.
constexpr stride_t kL2GroupBytes = stride_t(16) << 20;

/// A threadgroup's block of a grid (blocks, heads, batches): its x, head
/// (y) and batch (z).
struct GridBlock {
  int x;
  int head;
  int batch;
};

/// Where a grid row's heaviest block lies: x = 0 (dK/dV's key blocks) or
/// the last x (the forward's and dQ's query blocks).
enum class Heaviest { First, Last };

/// Block (bx, by, bz) of a grid (gx, gy, gz), dealt heaviest first in
/// groups of rows that share kL2GroupBytes, its x the rank from the
/// heaviest (0); `row_bytes`: what one row's threadgroups stream (K and V,
/// or Q and dO). A bijection of the grid onto itself
/// (tests/test_grid_order_compile.py checks it on the host).
__host__ __device__ inline GridBlock heaviest_first_block(
    int bx,
    int by,
    int bz,
    int gx,
    int gy,
    int gz,
    stride_t row_bytes) {
  const int rows = gy * gz;
  const stride_t fit = kL2GroupBytes / (row_bytes > 0 ? row_bytes : 1);
  const int group = fit < 1 ? 1 : fit < rows ? int(fit) : rows;
  const int l = bx + gx * (by + gy * bz);
  const int first = l / (group * gx) * group;
  const int in_group = l - first * gx;
  const int group_rows = rows - first < group ? rows - first : group;
  const int row = first + in_group % group_rows;
  return {in_group / group_rows, row % gy, row / gy};
}

/// Block (bx, by, bz) of a grid (gx, gy, gz) as a threadgroup takes it:
/// where `by_weight` (a causal grid, or one that follows a mask's block
/// lists, whose work mostly falls the causal way in mlx-lm's masks),
/// heaviest first with the heaviest of each row at kAt; else the grid's own
/// order. The static grid takes its own block (grid_block), a persistent
/// one each of its tiles (persistent_scheduler.cuh): one order for both.
template <Heaviest kAt>
__host__ __device__ inline GridBlock ordered_block(
    int bx,
    int by,
    int bz,
    int gx,
    int gy,
    int gz,
    bool by_weight,
    stride_t row_bytes) {
  if (!by_weight) {
    return {bx, by, bz};
  }
  GridBlock b = heaviest_first_block(bx, by, bz, gx, gy, gz, row_bytes);
  if (kAt == Heaviest::Last) {
    b.x = gx - 1 - b.x;
  }
  return b;
}

/// The features that an instance fixes at compile time, and whether its
/// grid takes its blocks by weight (ordered_block): where the work falls
/// by block.
template <bool kCausal, bool kHasMask>
__device__ __forceinline__ bool attention_fix_features(AttnFeatures& features) {
  features.causal = kCausal;
  features.has_mask = kHasMask;
  // Classes come only with a mask: a constant, so that unmasked
  // instances compile the plain run of key blocks.
  features.mask_blocks = kHasMask && features.mask_blocks;
  return kCausal || features.mask_blocks;
}

/// This threadgroup's block of the launched grid (ordered_block). The
/// grid's own order is taken before the grid's sizes are read, as the
/// static kernels' code has it.
template <Heaviest kAt>
__device__ GridBlock grid_block(bool by_weight, stride_t row_bytes) {
  if (!by_weight) {
    return {int(blockIdx.x), int(blockIdx.y), int(blockIdx.z)};
  }
  return ordered_block<kAt>(
      blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z,
      true, row_bytes);
}

} // namespace fa
