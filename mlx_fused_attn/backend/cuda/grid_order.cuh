// The order in which a causal attention grid's threadgroups take their
// blocks. Under a causal mask a block's work falls with its index counted
// from the heaviest (the forward's and dQ's last query blocks see every
// key, dK/dV's first key blocks every query). Taken per (head, batch) row
// of the grid, every row's heavy blocks start after the previous rows'
// light ones, and the last rows' heavy blocks run alone at the end. Dealt
// heaviest first across all rows, the threadgroups running at once would
// stream the blocks of every head and lose L2's reuse of them (measured:
// a forward of 128 heads of 8192 keys 1.6x slower). So the rows go in
// groups whose streamed blocks share L2, each group heaviest first.
#pragma once

#include "mlx_fused_attn/params.h"

namespace fa {

/// The streamed bytes that a group of rows may share in L2: a third of an
/// A100's or H100's.
constexpr stride_t kL2GroupBytes = stride_t(16) << 20;

/// A threadgroup's block: `rank` from the heaviest (0) in x, and its head
/// (y) and batch (z) of a grid (blocks, heads, batches).
struct GridBlock {
  int rank;
  int head;
  int batch;
};

/// `row_bytes`: what one row's threadgroups stream (K and V, or Q and dO).
template <bool kHeaviestFirst>
__device__ GridBlock grid_block(stride_t row_bytes) {
  if constexpr (kHeaviestFirst) {
    const int rows = gridDim.y * gridDim.z;
    const stride_t fit = kL2GroupBytes / (row_bytes > 0 ? row_bytes : 1);
    const int group = fit < 1 ? 1 : fit < rows ? int(fit) : rows;
    const int l =
        blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const int first = l / (group * gridDim.x) * group;
    const int in_group = l - first * gridDim.x;
    const int group_rows = rows - first < group ? rows - first : group;
    const int row = first + in_group % group_rows;
    return {in_group / group_rows, row % int(gridDim.y), row / int(gridDim.y)};
  } else {
    return {int(blockIdx.x), int(blockIdx.y), int(blockIdx.z)};
  }
}

} // namespace fa
