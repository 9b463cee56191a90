"""The split count of a call's keys (mlx_fused_attn/plan/split_count.h): within
the planner's bounds, every split visits keys (split_key_blocks gives each
an equal run, so a count past the fewest with that run leaves the last
splits empty), and the run stays the one the bounds asked for. Host C++
built with the machine's compiler: no GPU, no MLX; skips without one."""

import shutil

import pytest

from conftest import run_host_program

CXX = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler on the PATH")

PROGRAM = r"""
#include <algorithm>
#include <cstdio>
#include "mlx_fused_attn/plan/split_count.h"

using namespace mlx_fused_attn;

int main() {
  int failures = 0;
  for (long groups : {1, 2, 5, 8, 32, 64, 131, 264, 300})
    for (long wave : {32, 132, 264, 396})
      for (int blocks : {1, 2, 3, 7, 16, 31, 32, 33, 255, 256, 257, 1000, 4096})
        for (long most : {1, 3, 16, 33, 128, 1000}) {
          // What the bounds ask for, before the count is made the fewest.
          const long asked = groups >= wave
              ? 1
              : std::max(1L, std::min({wave / groups, most,
                                       long(blocks / kMinSplitKeyBlocks),
                                       long(kMaxKeySplits)}));
          const long splits = key_split_count(groups, wave, blocks, most);
          const long run = (blocks + asked - 1) / asked;
          const bool ok = splits >= 1 && splits <= asked &&
              (blocks + splits - 1) / splits == run &&
              (splits - 1) * run < blocks;
          if (!ok) {
            std::printf("groups %ld wave %ld blocks %d most %ld: %ld splits\n",
                        groups, wave, blocks, most, splits);
            ++failures;
          }
        }
  // Decoding B=1 with 8 KV heads at 2 blocks a multiprocessor on 132,
  // against 32768 keys in 128-key blocks: 33 asked, 32 of 8 blocks.
  failures += key_split_count(8, 264, 256, 256) != 32;
  std::printf("%d\n", failures);
  return failures != 0;
}
"""


def test_every_split_visits_keys(tmp_path):
    result = run_host_program(CXX, PROGRAM, tmp_path)
    assert result.returncode == 0, f"{result.stdout} failures"
