"""The coverage rules, as pure functions on every machine: which head dims,
axis counts and sequence lengths each kernel family takes
(attention_head_dims_supported, short_attention_covers,
quantized_attention_covers and the rest of the *_config.h headers), against tables written out here. The planners
(attention_planner.cpp, na_planner.cpp) ask exactly these functions, so a
changed rule sends calls to a kernel that is not built, or to the fallback,
without a GPU to show it."""

import itertools
import subprocess

import pytest

from . import emu

DTYPES = ("float16", "bfloat16", "float32")
BACKENDS = ("metal", "cuda")
# (head dim of q and k, head dim of v): equal pairs, and DeepSeek's latent
# attention (192 for q and k, 128 for v).
ATTENTION_HEAD_DIMS = {(d, d) for d in (32, 64, 72, 80, 96, 128, 192, 256)} | {(192, 128)}
SHORT_HEAD_DIMS = {32, 64, 128}
SHORT_SEQS = (16, 32, 48, 64)
NA_HEAD_DIMS = {32, 64, 128}
NA_AXES = {1, 2, 3}
# The quantized-KV family (quantized_attention_config.h): one head dim for q,
# k and v, of the float kernels' the whole multiples of 32; mlx-lm's 4 and
# 8 bits; groups of 32, 64 and 128 that divide the head dim (D = 32: 32 only).
QUANTIZED_HEAD_DIMS = (32, 64, 96, 128, 192, 256)
QUANTIZED_BITS = (4, 8)
# The longest sequence the short kernel holds per (backend, dtype, head
# dim). Metal: one sequence's Q, K and V, rows padded by 16 bytes, within
# 32 KB (fp32 D = 64 needs 39168 bytes at 48 rows, D = 128 50688 at 32);
# CUDA checks its device's limit at run time, so every capacity exists.
SHORT_MAX_SEQ = {
    ("metal", "float16"): {32: 64, 64: 64, 128: 32},
    ("metal", "bfloat16"): {32: 64, 64: 64, 128: 32},
    ("metal", "float32"): {32: 64, 64: 32, 128: 16},
    **{("cuda", t): {32: 64, 64: 64, 128: 64} for t in DTYPES},
}
MAX_HEAD_DIM = 256  # head dims swept (all of 1..256)
MAX_LENGTH = 80  # sequence lengths swept (all of 1..80)

PROGRAM = r"""
#include <cstdio>
#include <initializer_list>

#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/families/quantized_attention/quantized_attention_config.h"
#include "mlx_fused_attn/families/short_attention/short_attention_config.h"

int main() {
  const fa::DType types[] = {
      fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};
  const char* type_names[] = {"float16", "bfloat16", "float32"};
  const fa::Backend backends[] = {fa::Backend::Metal, fa::Backend::Cuda};
  const char* backend_names[] = {"metal", "cuda"};
  for (int d = 1; d <= MAX_HEAD_DIM; ++d) {
    for (int dv = 1; dv <= MAX_HEAD_DIM; ++dv)
      if (fa::attention_head_dims_supported(d, dv))
        std::printf("attention_head_dims %d %d\n", d, dv);
    if (fa::short_attention_head_dim_supported(d)) std::printf("short_head_dim %d\n", d);
    if (fa::na_head_dim_supported(d)) std::printf("na_head_dim %d\n", d);
  }
  for (int d = 1; d <= MAX_HEAD_DIM; ++d)
    for (int dv : {d, 128})
      for (int bits = 1; bits <= 8; ++bits)
        for (int group = 16; group <= 256; group *= 2)
          if (fa::quantized_attention_covers(d, dv, bits, group))
            std::printf("quantized_covers %d %d %d %d\n", d, dv, bits, group);
#define FA_PRINT_AXES(n) std::printf("na_axes %d\n", n);
  FA_NA_AXES(FA_PRINT_AXES)
#undef FA_PRINT_AXES
  for (int lq = 1; lq <= MAX_LENGTH; ++lq)
    for (int lk = 1; lk <= MAX_LENGTH; ++lk)
      std::printf("short_seq %d %d %d\n", lq, lk, fa::short_attention_seq(lq, lk));
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 3; ++t)
      for (int d = 1; d <= MAX_HEAD_DIM; ++d) {
#define FA_PRINT_INSTANTIATED(s)                                         \
  if (fa::short_attention_instantiated(d, types[t], backends[b], s))     \
    std::printf("short_instantiated %s %s %d %d\n", backend_names[b],   \
                type_names[t], d, s);
        FA_SHORT_ATTENTION_SEQS(FA_PRINT_INSTANTIATED)
#undef FA_PRINT_INSTANTIATED
        // Per (head dim, head dim of v): how many (L_q, L_k) pairs are
        // covered and the longest length among them, so that the output
        // stays small whatever the rule says.
        const int dvs[] = {d, 32, 64, 128};
        for (int dv : dvs) {
          if (dv == d && dv != dvs[0]) continue;
          int count = 0, reach = 0;
          for (int lq = 1; lq <= MAX_LENGTH; ++lq)
            for (int lk = 1; lk <= MAX_LENGTH; ++lk)
              if (fa::short_attention_covers(lq, lk, d, dv, types[t], backends[b])) {
                ++count;
                reach = lq > reach ? lq : reach;
                reach = lk > reach ? lk : reach;
              }
          if (count > 0)
            std::printf("short_covers %s %s %d %d %d %d\n", backend_names[b],
                        type_names[t], d, dv, count, reach);
        }
      }
}
"""


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    """{rule name: set of tuples of ints and names it printed}."""
    tmp = tmp_path_factory.mktemp("coverage")
    src = tmp / "rules.cpp"
    src.write_text(PROGRAM)
    exe = tmp / "rules"
    defines = [f"-DMAX_HEAD_DIM={MAX_HEAD_DIM}", f"-DMAX_LENGTH={MAX_LENGTH}"]
    build = subprocess.run([emu.CXX, "-std=c++17", "-O1", *defines, "-I", emu.REPO_ROOT, str(src),
                            "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        rule, *fields = line.split()
        table.setdefault(rule, set()).add(tuple(int(f) if f.isdigit() else f for f in fields))
    return table


def test_attention_head_dims(rules):
    assert rules["attention_head_dims"] == ATTENTION_HEAD_DIMS


def test_quantized_attention_covers(rules):
    want = {
        (d, d, bits, group)
        for d in QUANTIZED_HEAD_DIMS
        for bits in QUANTIZED_BITS
        for group in (32, 64, 128)
        if d % group == 0
    }
    assert rules["quantized_covers"] == want


def test_neighborhood_head_dims_and_axes(rules):
    assert rules["na_head_dim"] == {(d,) for d in NA_HEAD_DIMS}
    assert rules["na_axes"] == {(n,) for n in NA_AXES}


def test_short_head_dims(rules):
    assert rules["short_head_dim"] == {(d,) for d in SHORT_HEAD_DIMS}


def test_short_capacity_is_the_smallest_that_holds_both_lengths(rules):
    lengths = range(1, MAX_LENGTH + 1)
    want = {
        (lq, lk, next((s for s in SHORT_SEQS if s >= max(lq, lk)), 0))
        for lq, lk in itertools.product(lengths, lengths)
    }
    assert rules["short_seq"] == want


def test_short_instances(rules):
    want = {
        (b, t, d, s)
        for (b, t), caps in SHORT_MAX_SEQ.items()
        for d, longest in caps.items()
        for s in SHORT_SEQS
        if s <= longest
    }
    assert rules["short_instantiated"] == want


def test_short_attention_covers(rules):
    """Lengths up to the longest instance of (backend, dtype, head dim), one
    head dim for q, k and v; nothing else. Each line is (backend, dtype, D,
    D_v, pairs (L_q, L_k) covered, the longest length among them): `longest`
    squared pairs, none longer, are exactly those up to `longest`."""
    want = {
        (b, t, d, d, longest * longest, longest)
        for (b, t), caps in SHORT_MAX_SEQ.items()
        for d, longest in caps.items()
    }
    got = rules["short_covers"]
    assert not got - want, f"covered, but not in the table: {sorted(got - want)[:10]}"
    assert not want - got, f"in the table, but not covered: {sorted(want - got)[:10]}"
