// Must fail the conformance pass with [type] only: the error review
// found in na_grid.h, a `long long` parameter of an FA_HOST_DEVICE helper.
#include <metal_stdlib>

#include "mlx_fused_attn/na_window.h"

using namespace metal;

FA_HOST_DEVICE int blocks_for(long long items, int block) { // FORBIDDEN
  return int((items + block - 1) / block);
}

[[kernel]] void count_blocks(
    device int* out [[buffer(0)]],
    uint tid [[thread_position_in_grid]]) {
  out[tid] = blocks_for(tid, 32);
}
