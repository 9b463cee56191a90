"""CUDA's persistent grid (issue 46), on the host: when the plan runs the
producer kernel persistent and with how many blocks
(mlx_fused_attn/plan/persistent_grid.h), the opt-in switches of
kernel_switches.h (MLX_FUSED_ATTN_PERSISTENT and issue 46's others: "1"
alone takes the path; MLX_FUSED_ATTN_DEVICE_OUTPUTS, on by default now, "0"
alone leaves it), and the blocks' dynamic walk
(kernels/cuda/persistent_scheduler.cuh): under any interleaving of the
blocks' atomics on the walk's counter, every work tile is taken exactly
once, each block's tiles in increasing order of the grid's (heaviest first
where it is weighted), and the counter ends at the tile count; the slots
through which the producer publishes the tiles, in a model of their
barriers, hand every math warp each round's own tile and never deadlock;
and the tile numbers place each tile of the static grid (split, query
block, head, batch) once. Host C++: no GPU, no MLX; each part skips without
its compiler."""

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
#include <random>
#include <vector>
#include "mlx_fused_attn/kernels/cuda/persistent_scheduler.cuh"

// The blocks' walks under one interleaving of their atomics: each step, a
// block still walking (picked by `pick`) takes the counter's next value.
// Every tile is taken once, each block's first tile is its own number and
// its later ones increase, and the counter ends at the tile count (each
// block took one number past the last tile, which ended its walk).
template <typename Pick>
int walk(int tiles, int blocks, Pick pick) {
  int failures = 0;
  std::vector<int> seen(tiles, 0), last(blocks), walking;
  for (int b = 0; b < blocks; ++b) {
    last[b] = b;
    ++seen[b];
    walking.push_back(b);
  }
  unsigned counter = 0;
  while (!walking.empty()) {
    const int i = pick(int(walking.size()));
    const int b = walking[i];
    const int t = fa::persistent_next_tile(counter++, blocks);
    if (t >= tiles) {
      walking.erase(walking.begin() + i);
      continue;
    }
    failures += t <= last[b];
    last[b] = t;
    ++seen[t];
  }
  for (int n : seen) failures += n != 1;
  failures += counter != unsigned(tiles);
  return failures;
}

// The slots' barriers (persistent_slot_use), modelled as mbarriers: a phase
// completes at its count's arrivals, and a wait for parity p passes once
// the phase of that parity has completed. A producer publishes `tiles`
// tiles (its rounds 1 on, then the walk's end) and `warps` math warps read
// them, each step one of them (picked by `pick`) going as far as its
// barriers let it. Every warp reads each round's own tile (no slot
// rewritten before every warp read it), and no one waits for ever.
struct Barrier {
  int count, arrived = 0, phase = 0;
  bool passes(int parity) const { return (phase & 1) != parity; }
  void arrive() {
    if (++arrived == count) {
      arrived = 0;
      ++phase;
    }
  }
};

template <typename Pick>
int slots(int tiles, int warps, Pick pick) {
  Barrier full[2] = {{1}, {1}}, empty[2] = {{warps}, {warps}};
  int tile[2] = {-1, -1};
  // The producer's and each warp's next round; round r's tile is 100 + r.
  int produced = 1;
  std::vector<int> read(warps, 1);
  const int rounds = tiles + 1;
  int failures = 0;
  for (;;) {
    bool moved = false, done = produced > rounds;
    for (int r : read) done = done && r > rounds;
    if (done) return failures;
    const int who = pick(warps + 1);
    if (who == warps) {
      if (produced <= rounds) {
        const fa::PersistentSlotUse u = fa::persistent_slot_use(produced);
        if (u.use == 0 || empty[u.slot].passes((u.use - 1) & 1)) {
          tile[u.slot] = 100 + produced++;
          full[u.slot].arrive();
          moved = true;
        }
      }
    } else if (read[who] <= rounds) {
      const fa::PersistentSlotUse u = fa::persistent_slot_use(read[who]);
      if (full[u.slot].passes(u.use & 1)) {
        failures += tile[u.slot] != 100 + read[who]++;
        empty[u.slot].arrive();
        moved = true;
      }
    }
    // Deadlock: no one can move (checked by trying everyone once).
    if (!moved) {
      bool any = false;
      if (produced <= rounds) {
        const fa::PersistentSlotUse u = fa::persistent_slot_use(produced);
        any = u.use == 0 || empty[u.slot].passes((u.use - 1) & 1);
      }
      for (int w = 0; w < warps; ++w) {
        if (read[w] <= rounds) {
          const fa::PersistentSlotUse u = fa::persistent_slot_use(read[w]);
          any = any || full[u.slot].passes(u.use & 1);
        }
      }
      if (!any) return failures + 1000;
    }
  }
}

int main() {
  int failures = 0;
  std::mt19937 rng(46);
  for (int tiles : {1, 2, 7, 131, 132, 133, 263, 264, 1024, 4001})
    for (int blocks : {1, 2, 3, 132, 264}) {
      if (blocks > tiles) continue;
      // Round-robin, one block at a time to its end, the last block first,
      // and random interleavings.
      int next = 0;
      failures += walk(tiles, blocks, [&](int n) { return next++ % n; });
      failures += walk(tiles, blocks, [](int) { return 0; });
      failures += walk(tiles, blocks, [](int n) { return n - 1; });
      for (int seed = 0; seed < 4; ++seed) {
        rng.seed(seed);
        failures += walk(tiles, blocks, [&](int n) { return int(rng() % n); });
      }
      if (failures) {
        std::printf("walk: tiles %d blocks %d\n", tiles, blocks);
        return 1;
      }
    }
  for (int tiles : {0, 1, 2, 3, 8, 33})
    for (int warps : {1, 4, 8})
      for (int seed = 0; seed < 20; ++seed) {
        rng.seed(seed);
        failures += slots(tiles, warps, [&](int n) { return int(rng() % n); });
        if (failures) {
          std::printf("slots: tiles %d warps %d seed %d\n", tiles, warps, seed);
          return 1;
        }
      }
  // The scheduler's places: the walk's tile numbers place each (split,
  // query block, head, batch) of the static grid once, heaviest first or
  // not, with splits, GQA-sized rows; a number past the last is the end.
  for (int q_blocks : {1, 3, 16})
    for (int splits : {1, 2})
      for (int heads : {1, 8, 32})
        for (int batch : {1, 3})
          for (int weighted = 0; weighted < 2; ++weighted) {
            const fa::AttnPersistentTiles s = {
                q_blocks * splits, heads, batch, splits, weighted == 1, 1 << 20,
                nullptr, nullptr};
            const int tiles = q_blocks * splits * heads * batch;
            std::vector<int> seen(tiles, 0);
            for (int t = 0; t < tiles; ++t) {
              const fa::AttnWork w = s.work(t, 1);
              const fa::AttnPlace p = w.place;
              if (!w.valid || w.round != 1 || p.split.count != splits ||
                  p.split.index < 0 || p.split.index >= splits ||
                  p.q_block < 0 || p.q_block >= q_blocks || p.head < 0 ||
                  p.head >= heads || p.batch < 0 || p.batch >= batch) {
                ++failures;
                continue;
              }
              ++seen[((p.batch * heads + p.head) * q_blocks + p.q_block) * splits +
                     p.split.index];
            }
            for (int n : seen) failures += n != 1;
            failures += s.work(tiles, 2).valid || s.work(tiles + 7, 2).valid;
          }
  // Weighted: the first tile of the order is a row's last query block.
  const fa::AttnPersistentTiles causal = {4, 32, 8, 1, true, 1 << 20, nullptr, nullptr};
  failures += causal.work(0, 0).place.q_block != 3;
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
