"""Hopper's small-grid producer tiles (issue 46, opt-in), on the host: where
they exist (attention_config.h, has_small_grid_tiles), that two of them fit
an H100's or H200's multiprocessor and ask the driver for all of its shared
memory, that the existing tiles' carveout is unchanged, and which grids the
plan's rule (plan/small_grid.h) calls small: issue 46's rows on 132
multiprocessors, decode never, a device of unknown size never. Host C++:
no GPU, no MLX."""

import shutil

import pytest

from conftest import run_host_program

CXX = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)

RULE = r"""
#include <cstdio>
#include <initializer_list>
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/plan/small_grid.h"

using namespace mlx_fused_attn;

int failures = 0;

void expect(bool got, bool want, const char* what) {
  if (got != want) {
    std::printf("%s: %d, expected %d\n", what, got, want);
    ++failures;
  }
}

fa::AttnParams prefill(int B, int H_q, int H_kv, int L_q, int L_k, int D) {
  fa::AttnParams p{};
  p.B = B; p.H_q = H_q; p.H_kv = H_kv; p.gqa_factor = H_q / H_kv;
  p.L_q = L_q; p.L_k = L_k; p.D = D; p.D_v = D;
  p.causal_offset = L_k - L_q;
  return p;
}

// The planner's tiles before the rule: past one wave of the default tiles
// (their blocks a multiprocessor times the multiprocessors), the large-grid
// ones (attention_planning.cpp).
fa::AttnTiles chooser_tiles(const fa::AttnParams& p, fa::DType t, int sms) {
  const fa::AttnTiles one_wave =
      fa::choose_attention_tiles(p.D, p.D_v, t, fa::Backend::Cuda, true, false);
  const long q_blocks = long((p.L_q + one_wave.bq - 1) / one_wave.bq) * p.H_q * p.B;
  return q_blocks > long(one_wave.min_blocks) * sms
      ? fa::choose_attention_tiles(p.D, p.D_v, t, fa::Backend::Cuda, true, true)
      : one_wave;
}

bool small(const fa::AttnParams& p, fa::DType t, int sms = 132) {
  return small_grid(p, chooser_tiles(p, t, sms), sms);
}

int main() {
  const fa::DType bf16 = fa::DType::BFloat16, f16 = fa::DType::Float16;
  // Where they exist: 16 bits, whole 128-byte panels for the TMA copies.
  for (int d : {64, 128}) {
    expect(fa::has_small_grid_tiles(d, d, bf16, fa::Backend::Cuda, true), true, "16 bits");
    expect(fa::has_small_grid_tiles(d, d, f16, fa::Backend::Cuda, false), false, "no wgmma");
    expect(fa::has_small_grid_tiles(d, d, fa::DType::Float32, fa::Backend::Cuda, true), false,
           "fp32");
    expect(fa::has_small_grid_tiles(d, d, f16, fa::Backend::Metal, true), false, "Metal");
    const fa::AttnTiles t = fa::choose_small_grid_tiles(d);
    expect(t.producer && t.wgmma && t.q_shared && t.bq == 64 && t.warps == 4 &&
               t.stages == 3 && t.min_blocks == 2 && !t.persistent,
           true, "the tiles");
    // Two blocks of it (each with the 1 KB the driver reserves a block)
    // within a multiprocessor's 228 KB, one within a block's 227 KB.
    for (fa::DType dt : {f16, bf16}) {
      const int smem = fa::attention_smem_bytes(t, d, d, dt, fa::Backend::Cuda);
      expect(2 * (smem + 1024) <= 228 * 1024, true, "two a multiprocessor");
      expect(smem <= 227 * 1024, true, "a block's shared memory");
    }
    expect(fa::attention_prefers_max_shared(t), true, "the small tiles' carveout");
  }
  for (int d : {32, 72, 80, 96, 192, 256}) {
    expect(fa::has_small_grid_tiles(d, d, bf16, fa::Backend::Cuda, true), false,
           "a head dim of a ragged panel or too large");
  }
  expect(fa::has_small_grid_tiles(192, 128, bf16, fa::Backend::Cuda, true), false, "MLA");
  // The existing tiles keep their carveout: 3 blocks or more only.
  expect(fa::attention_prefers_max_shared(
             fa::choose_attention_tiles(128, 128, bf16, fa::Backend::Cuda, true, true)),
         false, "the large-grid producer tiles");
  expect(fa::attention_prefers_max_shared(
             fa::choose_attention_tiles(128, 128, bf16, fa::Backend::Cuda, true, false)),
         false, "the one-wave tiles");
  expect(fa::attention_prefers_max_shared(
             fa::choose_attention_tiles(64, 64, f16, fa::Backend::Cuda, true, false)),
         true, "D = 64's three blocks");
  // Issue 46's rows on an H100 (132 multiprocessors). Keys up to 1024:
  // causal GQA prefill B=8 L=512, B=4 L=1024, B=1 L=512; D = 64 B=1 L=1024.
  expect(small(prefill(8, 32, 8, 512, 512, 128), bf16), true, "B=8 L=512");
  expect(small(prefill(4, 32, 8, 1024, 1024, 128), bf16), true, "B=4 L=1024");
  expect(small(prefill(1, 32, 8, 512, 512, 128), bf16), true, "B=1 L=512");
  expect(small(prefill(1, 32, 32, 1024, 1024, 64), f16), true, "D=64 B=1 L=1024");
  // Past 1024 keys, small only under two waves of the chooser's tiles:
  // B=2 L=2048 GQA and B=1 H=32 L=2048 are 1024 and 512 blocks of 128
  // queries (3.9 waves and more); chunked prefill B=8 (128 queries, 4096
  // keys) is 256, under two; 64 heads of it on 264 multiprocessors too.
  expect(small(prefill(2, 32, 8, 2048, 2048, 128), bf16), false, "B=2 L=2048");
  expect(small(prefill(1, 32, 32, 2048, 2048, 128), f16), false, "B=1 L=2048");
  expect(small(prefill(8, 32, 8, 128, 4096, 128), bf16), true, "chunked prefill B=8");
  expect(small(prefill(16, 32, 8, 128, 4096, 128), bf16), false, "chunked prefill B=16");
  expect(small(prefill(16, 32, 8, 128, 4096, 128), bf16, 264), true, "on 264");
  // D = 64 past 1024 keys: under two waves of 3 blocks a multiprocessor.
  expect(small(prefill(1, 32, 32, 2048, 2048, 64), f16), false, "D=64 B=1 L=2048");
  expect(small(prefill(1, 12, 12, 2048, 2048, 64), f16), true, "D=64 H=12 L=2048");
  // Decode and short chunks never; a device of unknown size never.
  expect(small(prefill(1, 32, 8, 1, 512, 128), bf16), false, "decode");
  expect(small(prefill(1, 32, 8, 127, 512, 128), bf16), false, "127 queries");
  expect(small(prefill(1, 32, 8, 128, 512, 128), bf16), true, "128 queries");
  expect(small_grid(prefill(1, 32, 8, 512, 512, 128),
                    chooser_tiles(prefill(1, 32, 8, 512, 512, 128), bf16, 132), 0),
         false, "no multiprocessor count");
  std::printf("%d\n", failures);
  return failures != 0;
}
"""


@pytest.mark.skipif(CXX is None, reason="no C++ compiler on the PATH")
def test_small_grid_tiles_and_rule(tmp_path):
    result = run_host_program(CXX, RULE, tmp_path)
    assert result.returncode == 0, result.stdout
