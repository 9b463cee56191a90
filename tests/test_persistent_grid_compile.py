"""CUDA's persistent grid (issue 46), on the host: when the plan runs the
producer kernel persistent and with how many blocks
(mlx_fused_attn/plan/persistent_grid.h), the opt-in switches of
kernel_switches.h (MLX_FUSED_ATTN_PERSISTENT and issue 46's others: "1"
alone takes the path; MLX_FUSED_ATTN_DEVICE_OUTPUTS, on by default now, "0"
alone leaves it), and that the blocks' walks
(kernels/cuda/persistent_scheduler.cuh) take every work tile exactly once,
each block's tiles in increasing order of the grid's (heaviest first where
it is weighted), the round-robin's directions alternating, and place each
tile of the static grid (split, query block, head, batch) once. Host C++: no GPU, no MLX; each part skips without its
compiler."""

import shutil

import pytest

from conftest import run_host_program
from test_cuda_compile import find_nvcc

CXX = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)

CHOICE = r"""
#include <cstdio>
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/plan/persistent_grid.h"

using namespace mlx_fused_attn;

int failures = 0;

void expect(long got, long want, const char* what) {
  if (got != want) {
    std::printf("%s: %ld, expected %ld\n", what, got, want);
    ++failures;
  }
}

int main() {
  // Hopper's D = 128 tiles past one wave (the producer's) and within one.
  const fa::AttnTiles producer =
      fa::choose_attention_tiles(128, 128, fa::DType::BFloat16, fa::Backend::Cuda, true, true);
  const fa::AttnTiles one_wave =
      fa::choose_attention_tiles(128, 128, fa::DType::BFloat16, fa::Backend::Cuda, true, false);
  const fa::AttnTiles ampere =
      fa::choose_attention_tiles(128, 128, fa::DType::BFloat16, fa::Backend::Cuda, false, true);
  if (!producer.producer || one_wave.producer || ampere.producer) {
    std::printf("the chooser's producer tiles moved\n");
    return 1;
  }
  const auto P = PersistentChoice::Planner;
  // Issue 46's prefill rows on an H100 (132 multiprocessors, a block each):
  // B=8 L=512 and B=4 L=1024 with 32 query heads, 1024 tiles of 128 rows,
  // 7.8 waves: persistent, a block a multiprocessor.
  expect(persistent_grid_blocks(producer, 4 * 32 * 8, 132, P), 132, "B=8 L=512");
  // B=1 H=32 L=2048: 512 tiles, 3.9 waves.
  expect(persistent_grid_blocks(producer, 16 * 32, 132, P), 132, "B=1 L=2048");
  // B=4 H=32 L=8192: 8192 tiles, 62 waves: static.
  expect(persistent_grid_blocks(producer, 64 * 32 * 4, 132, P), 0, "B=4 L=8192");
  // At the bound and past it.
  expect(persistent_grid_blocks(producer, kPersistentMaxWaves * 132, 132, P), 132,
         "the last wave count");
  expect(persistent_grid_blocks(producer, kPersistentMaxWaves * 132 + 1, 132, P), 0,
         "past the waves");
  // One wave or less: every tile has its multiprocessor already.
  expect(persistent_grid_blocks(producer, 132, 132, P), 0, "one wave");
  // Only the producer kernel walks tiles; a device of unknown size none.
  expect(persistent_grid_blocks(one_wave, 1024, 132, P), 0, "one-wave tiles");
  expect(persistent_grid_blocks(ampere, 1024, 132, P), 0, "mma.sync tiles");
  expect(persistent_grid_blocks(producer, 1024, 0, P), 0, "no multiprocessor count");
  // Forced: every producer grid, small ones a block a tile; or none.
  const auto A = PersistentChoice::Always;
  const auto N = PersistentChoice::Never;
  expect(persistent_grid_blocks(producer, 100, 132, A), 100, "forced, under a wave");
  expect(persistent_grid_blocks(producer, 64 * 32 * 4, 132, A), 132, "forced, 62 waves");
  expect(persistent_grid_blocks(one_wave, 1024, 132, A), 0, "forced, one-wave tiles");
  expect(persistent_grid_blocks(producer, 1024, 132, N), 0, "never");
  std::printf("%d\n", failures);
  return failures != 0;
}
"""

SWITCH = r"""
#include <cstdio>
#include <cstdlib>
#include "mlx_fused_attn/plan/kernel_switches.h"

using namespace mlx_fused_attn;

// Each opt-in switch (issue 46's paths, slower somewhere they apply) is on for
// "1" alone: unset, empty, "0" and anything else leave the path off.
struct OptIn {
  const char* variable;
  bool (*on)();
};

int main() {
  const OptIn switches[] = {
      {"MLX_FUSED_ATTN_SPLIT_MERGE", split_merge_enabled},
      {"MLX_FUSED_ATTN_BWD_ONE_KERNEL", backward_one_kernel_enabled},
      {"MLX_FUSED_ATTN_PERSISTENT",
       [] { return persistent_choice() == PersistentChoice::Always; }},
      {"MLX_FUSED_ATTN_SMALL_GRID_PRODUCER", small_grid_producer_enabled},
  };
  int failures = 0;
  for (const OptIn& s : switches) {
    unsetenv(s.variable);
    failures += s.on();
    for (const char* off : {"", "0", "on", "10", "true"}) {
      setenv(s.variable, off, 1);
      failures += s.on();
    }
    setenv(s.variable, "1", 1);
    failures += !s.on();
    unsetenv(s.variable);
    if (failures) {
      std::printf("%s\n", s.variable);
      return 1;
    }
  }
  failures += persistent_choice() != PersistentChoice::Never;
  setenv("MLX_FUSED_ATTN_PERSISTENT", "0", 1);
  failures += persistent_choice() != PersistentChoice::Never;
  // Outputs in device memory left opt-in once a GPU run checked them: off
  // for "0" alone.
  unsetenv("MLX_FUSED_ATTN_DEVICE_OUTPUTS");
  failures += !device_outputs_enabled();
  setenv("MLX_FUSED_ATTN_DEVICE_OUTPUTS", "0", 1);
  failures += device_outputs_enabled();
  setenv("MLX_FUSED_ATTN_DEVICE_OUTPUTS", "1", 1);
  failures += !device_outputs_enabled();
  unsetenv("MLX_FUSED_ATTN_DEVICE_OUTPUTS");
  std::printf("%d\n", failures);
  return failures != 0;
}
"""

WALK = r"""
#include <cstdio>
#include <vector>
#include "mlx_fused_attn/kernels/cuda/persistent_scheduler.cuh"

int main() {
  int failures = 0;
  for (int tiles : {1, 2, 7, 131, 132, 133, 263, 264, 1024, 4001})
    for (int blocks : {1, 2, 3, 132, 264}) {
      if (blocks > tiles) continue;
      std::vector<int> seen(tiles, 0);
      std::vector<int> heaviest_first(2, -1);
      for (int b = 0; b < blocks; ++b) {
        int last = -1;
        for (int round = 0;; ++round) {
          const int t = fa::persistent_tile(b, blocks, round);
          if (t >= tiles) break;
          failures += t <= last || t < 0;
          last = t;
          ++seen[t];
        }
      }
      for (int n : seen) failures += n != 1;
      // A block that takes a round's first tile takes the next round's last.
      if (blocks > 1) {
        failures += fa::persistent_tile(0, blocks, 0) != 0;
        failures += fa::persistent_tile(0, blocks, 1) != 2 * blocks - 1;
      }
      if (failures) {
        std::printf("tiles %d blocks %d\n", tiles, blocks);
        return 1;
      }
    }
  // The scheduler's places: every (split, query block, head, batch) of the
  // static grid once, heaviest first or not, with splits, GQA-sized rows.
  for (int q_blocks : {1, 3, 16})
    for (int splits : {1, 2})
      for (int heads : {1, 8, 32})
        for (int batch : {1, 3})
          for (int weighted = 0; weighted < 2; ++weighted)
            for (int blocks : {1, 7, 132}) {
              const fa::AttnPersistentScheduler s = {
                  q_blocks * splits, heads, batch, splits, weighted == 1, 1 << 20};
              std::vector<int> seen(q_blocks * splits * heads * batch, 0);
              for (int b = 0; b < blocks; ++b)
                for (fa::AttnWork w = s.work(b, blocks, 0); w.valid;
                     w = s.work(b, blocks, w.round + 1)) {
                  const fa::AttnPlace p = w.place;
                  if (p.split.count != splits || p.split.index < 0 ||
                      p.split.index >= splits || p.q_block < 0 ||
                      p.q_block >= q_blocks || p.head < 0 || p.head >= heads ||
                      p.batch < 0 || p.batch >= batch) {
                    ++failures;
                    continue;
                  }
                  ++seen[((p.batch * heads + p.head) * q_blocks + p.q_block) * splits +
                         p.split.index];
                }
              for (int n : seen) failures += n != 1;
            }
  // Weighted: a block's first tile is a row's last query block.
  const fa::AttnPersistentScheduler causal = {4, 32, 8, 1, true, 1 << 20};
  failures += causal.work(0, 132, 0).place.q_block != 3;
  std::printf("%d\n", failures);
  return failures != 0;
}
"""


@pytest.mark.skipif(CXX is None, reason="no C++ compiler on the PATH")
def test_plan_chooses_the_persistent_grid(tmp_path):
    result = run_host_program(CXX, CHOICE, tmp_path)
    assert result.returncode == 0, result.stdout


@pytest.mark.skipif(CXX is None, reason="no C++ compiler on the PATH")
def test_opt_in_switches_take_their_path_on_1_alone(tmp_path):
    result = run_host_program(CXX, SWITCH, tmp_path)
    assert result.returncode == 0, result.stdout


def test_walks_take_every_tile_once(tmp_path):
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    result = run_host_program(nvcc, WALK, tmp_path, suffix=".cu")
    assert result.returncode == 0, result.stdout
