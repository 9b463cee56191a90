"""Which form of the combine of split keys a plan takes
(mlx_fused_attn/plan/split_count.h's split_combine_form, which both
planners set as plan.combine_form): on CUDA from 8 splits up a threadgroup
a row where a thread an element would fill fewer blocks than
multiprocessors, else the grouped form; the one-element form below 8; on
Metal always the one-element form (its only one);
MLX_FUSED_ATTN_SPLIT_COMBINE ("one_element", "grouped", "row";
kernel_switches.h) forcing any on CUDA alone; each form's grid. And the
H100 A/B's rows through the planner's split count (family_planning.cpp's
key_splits_of, as the decode sweeps count it): decode B=1 with 32/8 heads,
D = 128, bf16 at 4096 and 32768 keys takes 16 and 32 splits, a
threadgroup a row; decode B=8 and chunked prefill (128 queries against
4096 and 8192 keys) 4, one-element.
Host C++ built with the machine's compiler: no GPU, no MLX; skips without
one."""

import shutil

import pytest

from conftest import run_host_program

CXX = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler on the PATH")

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include "mlx_fused_attn/kernels/attention_config.h"
#include "mlx_fused_attn/plan/kernel_switches.h"
#include "mlx_fused_attn/plan/split_count.h"

using namespace mlx_fused_attn;
using Form = fa::SplitCombineForm;

int failures = 0;

void expect(Form got, Form want, const char* what, int splits) {
  if (got != want) {
    std::printf("%s at %d splits: form %d, expected %d\n", what, splits, int(got), int(want));
    ++failures;
  }
}

/// The float planner's splits of bf16 D = 128 on an H100 (132
/// multiprocessors, the one-wave tiles): key_splits_of's arithmetic.
int h100_splits(int B, int H_q, int L_q, int L_k) {
  const fa::AttnTiles t =
      fa::choose_attention_tiles(128, 128, fa::DType::BFloat16, fa::Backend::Cuda, true, false);
  const long groups = long((L_q + t.bq - 1) / t.bq) * H_q * B;
  const long most = splits_worth_their_partials(
      L_k, L_q < t.bq ? L_q : t.bq, 128, 128, 2, 2 * groups >= 132 ? 16 : 8);
  return key_split_count(groups, long(t.min_blocks) * 132, (L_k + t.bk - 1) / t.bk, most);
}

/// An output of B * H_q * L_q rows of D_v: what the rule reads of p.
fa::AttnParams output(int B, int H_q, int L_q, int D_v) {
  fa::AttnParams p{};
  p.B = B;
  p.H_q = H_q;
  p.L_q = L_q;
  p.D_v = D_v;
  return p;
}

int main() {
  unsetenv("MLX_FUSED_ATTN_SPLIT_COMBINE");
  // 131 blocks of 256 elements: under 132 multiprocessors, a row a
  // threadgroup; 132 blocks: grouped.
  const fa::AttnParams few = output(1, 131, 2, 128);
  const fa::AttnParams many = output(1, 132, 2, 128);
  for (int splits = 1; splits <= kMaxKeySplits; ++splits) {
    const Form small = split_combine_form(
        fa::Backend::Cuda, splits, few, 132, forced_split_combine_form());
    expect(small, splits >= 8 ? Form::RowThreadgroup : Form::OneElement, "CUDA, few rows", splits);
    const Form large = split_combine_form(fa::Backend::Cuda, splits, many, 132);
    expect(large, splits >= 8 ? Form::Grouped : Form::OneElement, "CUDA, many rows", splits);
    expect(split_combine_form(fa::Backend::Metal, splits, few, 132), Form::OneElement, "Metal",
           splits);
  }
  const struct { int B, H_q, L_q, L_k, splits; Form form; const char* row; } rows[] = {
      {1, 8, 4, 4096, 16, Form::RowThreadgroup, "decode B=1 4K"},
      {1, 8, 4, 32768, 32, Form::RowThreadgroup, "decode B=1 32K"},
      {8, 8, 4, 4096, 4, Form::OneElement, "decode B=8 4K"},
      {8, 8, 4, 32768, 4, Form::OneElement, "decode B=8 32K"},
      {1, 32, 128, 4096, 4, Form::OneElement, "chunked prefill 4K"},
      {1, 32, 128, 8192, 4, Form::OneElement, "chunked prefill 8K"},
  };
  for (const auto& r : rows) {
    const int splits = h100_splits(r.B, r.H_q, r.L_q, r.L_k);
    if (splits != r.splits) {
      std::printf("%s: %d splits, expected %d\n", r.row, splits, r.splits);
      ++failures;
    }
    expect(split_combine_form(fa::Backend::Cuda, splits, output(r.B, r.H_q, r.L_q, 128), 132),
           r.form, r.row, splits);
  }
  // The combine's grid along x: a block a row, or a thread an element.
  const fa::AttnParams grid_p = output(2, 8, 5, 80);
  if (split_combine_blocks_x(Form::RowThreadgroup, grid_p) != 5 ||
      split_combine_blocks_x(Form::Grouped, grid_p) != 2 ||
      split_combine_blocks_x(Form::OneElement, output(1, 1, 7, 80)) != 3) {
    std::printf("split_combine_blocks_x\n");
    ++failures;
  }
  // The switch forces CUDA's form any way; Metal keeps its one form;
  // other values leave the rule.
  setenv("MLX_FUSED_ATTN_SPLIT_COMBINE", "grouped", 1);
  expect(split_combine_form(fa::Backend::Cuda, 4, few, 132, forced_split_combine_form()),
         Form::Grouped, "forced grouped", 4);
  expect(split_combine_form(fa::Backend::Metal, 32, few, 132, forced_split_combine_form()),
         Form::OneElement, "Metal, forced grouped", 32);
  setenv("MLX_FUSED_ATTN_SPLIT_COMBINE", "one_element", 1);
  expect(split_combine_form(fa::Backend::Cuda, 32, few, 132, forced_split_combine_form()),
         Form::OneElement, "forced one-element", 32);
  setenv("MLX_FUSED_ATTN_SPLIT_COMBINE", "row", 1);
  expect(split_combine_form(fa::Backend::Cuda, 4, many, 132, forced_split_combine_form()),
         Form::RowThreadgroup, "forced row", 4);
  setenv("MLX_FUSED_ATTN_SPLIT_COMBINE", "1", 1);
  expect(split_combine_form(fa::Backend::Cuda, 32, few, 132, forced_split_combine_form()),
         Form::RowThreadgroup, "another value", 32);
  std::printf("%d\n", failures);
  return failures != 0;
}
"""


def test_the_plan_picks_the_combine_form_by_split_count(tmp_path):
    result = run_host_program(CXX, PROGRAM, tmp_path)
    assert result.returncode == 0, f"{result.stdout}{result.stderr} failures"
