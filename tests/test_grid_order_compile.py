"""The order in which causal CUDA grids take their blocks
(mlx_fused_attn/kernels/cuda/grid_order.cuh): heaviest_first_block maps
every grid onto itself one to one, so no block runs twice or never, and
deals the blocks of each group of rows heaviest first. Host code built
with nvcc: no GPU needed; skips without nvcc."""

import pytest

from conftest import run_host_program
from test_cuda_compile import find_nvcc

PROGRAM = r"""
#include <cstdio>
#include <vector>
#include "mlx_fused_attn/kernels/cuda/grid_order.cuh"

int main() {
  const int xs[] = {1, 2, 3, 7, 64, 129};
  const int ys[] = {1, 2, 5, 32, 40};
  const int zs[] = {1, 2, 3, 8};
  const long long bytes[] = {0, 1, 1 << 20, 3 << 20, 5 << 20, 16 << 20, 1LL << 34};
  int failures = 0;
  for (int gx : xs)
    for (int gy : ys)
      for (int gz : zs)
        for (long long rb : bytes) {
          std::vector<int> seen(gx * gy * gz, 0);
          std::vector<int> last_rank(gy * gz, -1);
          bool ordered = true;
          for (int bz = 0; bz < gz; ++bz)
            for (int by = 0; by < gy; ++by)
              for (int bx = 0; bx < gx; ++bx) {
                const fa::GridBlock g =
                    fa::heaviest_first_block(bx, by, bz, gx, gy, gz, rb);
                if (g.x < 0 || g.x >= gx || g.head < 0 || g.head >= gy ||
                    g.batch < 0 || g.batch >= gz) {
                  ++failures;
                  continue;
                }
                ++seen[(g.batch * gy + g.head) * gx + g.x];
              }
          for (int n : seen) failures += n != 1;
          // Within a row, launch order gives ranks in increasing order.
          for (int l = 0; l < gx * gy * gz && ordered; ++l) {
            const fa::GridBlock g = fa::heaviest_first_block(
                l % gx, l / gx % gy, l / (gx * gy), gx, gy, gz, rb);
            const int row = g.batch * gy + g.head;
            ordered = g.x > last_rank[row];
            last_rank[row] = g.x;
          }
          failures += !ordered;
        }
  std::printf("%d\n", failures);
  return failures != 0;
}
"""


def test_heaviest_first_block_is_a_bijection(tmp_path):
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    result = run_host_program(nvcc, PROGRAM, tmp_path, suffix=".cu")
    assert result.returncode == 0, f"{result.stdout} failures"
