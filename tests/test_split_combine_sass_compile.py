"""The combine kernels of split keys (the general kernel's and the quantized
one's) in the three forms the plan picks between by split count and rows
(plan/split_count.h's split_combine_form; kernels/split_combine_form.h),
each the machine code that an H100 A/B measured:

- one-element (split_combine_element), the base's loop: one integer
  division an element (row and column), each split's loads used as they
  come. Through split_combine_elements<1> the column took two more (`% D_v`
  before the merge and at the store), and with the split rows' offsets
  recomputed at each split the combine ran 14% more instructions a thread
  at 4 splits: chunked prefill (128 queries against 4096 keys, a combine of
  2048 threadgroups) 1.021 times slower.
- grouped (split_combine_element_grouped, through split_combine_elements<1>):
  the weights' loads of a batch of 4 splits (each split's max, sum and
  partial: 12) all issued before the first exp2 that uses them, which made
  decode at B=1 (16 and 32 splits, a combine of a few threadgroups that
  waits on memory) 0.94 and 0.97 of the one-element form's time.
- a threadgroup a row (split_combine_row): a batch of 4 splits' loads (each
  split's max and sum, and 4 columns of its partial a lane: 24) issued
  before the first exp2, with no branch between them.

The kernels checked are the ones the host launches: a host program prints
the expressions of the combine keys (attention_kernel_key.h,
quantized_attention_kernel_key.h) in the form split_combine_form gives at 4
splits (chunked prefill, decode B=8), at 16 over many rows, and at 32 over
decode's few (B=1, 32 rows of 128), so that a change to the rule or to a
form fails here. Each is compiled for sm_90a and
its SASS read: the reciprocal that starts an integer division by a value
known only at run time (I2F.RP or I2F.U32.RP, then MUFU.RCP), and the most
loads (LDG) issued before a MUFU.EX2 with no max (FMNMX) or branch between.
Skips without a C++ compiler, nvcc or nvdisasm."""

import re
import shutil
import subprocess

import pytest

from conftest import run_host_program
from test_cuda_compile import nvcc_output
from test_producer_sass_compile import find_nvdisasm

CXX = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)

# A batch of 4 splits' weights: each split's max, sum and partial.
GROUPED_LOADS = 12
# A threadgroup a row: 4 splits' max, sum and 4 columns a lane.
ROW_LOADS = 24

SELECTION = r"""
#include <cstdio>
#include "mlx_fused_attn/families/attention/cuda/attention_kernel_key.h"
#include "mlx_fused_attn/families/quantized_attention/cuda/quantized_attention_kernel_key.h"
#include "mlx_fused_attn/plan/split_count.h"

using namespace mlx_fused_attn;

int main() {
  const fa::DType types[] = {fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};
  // Rows of 128: chunked prefill's, a large grid's, decode's.
  const struct { int splits, rows; } cases[] = {{4, 4096}, {16, 4096}, {32, 32}};
  for (const auto& c : cases)
    for (fa::DType t : types) {
      fa::AttnParams p{};
      p.B = 1;
      p.H_q = c.rows;
      p.L_q = 1;
      p.D_v = 128;
      const int splits = c.splits;
      const fa::SplitCombineForm form = split_combine_form(fa::Backend::Cuda, splits, p, 132);
      std::printf("%d %s\n", splits, cuda::SplitCombineKernelKey{t, form}.expression().c_str());
      std::printf("%d %s\n", splits,
                  cuda::QuantizedSplitCombineKernelKey{t, form}.expression().c_str());
    }
}
"""


def selected_kernels(tmp_path):
    """[(splits, expression)] of the combines the host launches."""
    result = run_host_program(CXX, SELECTION, tmp_path)
    assert result.returncode == 0, result.stderr
    return [tuple(line.split(" ", 1)) for line in result.stdout.splitlines()]


def loads_before_exp2(body):
    """The most LDG issued before a MUFU.EX2, none of FMNMX or a branch
    between them."""
    best = run = 0
    for line in body.splitlines():
        if re.search(r"\bLDG\b", line):
            run += 1
        elif re.search(r"\bMUFU\.EX2\b", line):
            best, run = max(best, run), 0
        elif re.search(r"\b(FMNMX|BRA)\b", line):
            run = 0
    return best


@pytest.mark.skipif(CXX is None, reason="no C++ compiler on the PATH")
def test_each_split_count_runs_its_measured_form(tmp_path):
    nvdisasm = find_nvdisasm()
    if nvdisasm is None:
        pytest.skip("nvdisasm not found")
    kernels = selected_kernels(tmp_path)
    assert len(kernels) == 18, kernels
    source = (
        '#include "mlx_fused_attn/families/attention/attention_kernel.cuh"\n'
        '#include "mlx_fused_attn/families/quantized_attention/quantized_attention_kernel.cuh"\n'
        "const void* kernels[] = {\n"
        + "".join(f"    (const void*){expression},\n" for _, expression in kernels)
        + "};\n"
    )
    cubin = nvcc_output(tmp_path, source, "cubin", "sm_90a")
    sass = subprocess.run([nvdisasm, str(cubin)], check=True, capture_output=True, text=True).stdout
    functions = re.split(r"\n//-+ \.text\.", sass)[1:]
    assert len(functions) == 18
    # The mangled name's last template argument: the form (0 one-element,
    # 1 grouped, 2 a threadgroup a row; kernels/split_combine_form.h's
    # order).
    by_form = {}
    for body in functions:
        name = body.splitlines()[0].strip()
        form = re.search(r"SplitCombineFormE(\d)E", name)
        assert form, name
        by_form.setdefault(int(form.group(1)), []).append((name, body))
    forms = {"4": "OneElement", "16": "Grouped", "32": "RowThreadgroup"}
    for splits, expression in kernels:
        assert expression.endswith(f"fa::SplitCombineForm::{forms[splits]}>"), (splits, expression)
    assert sorted(len(v) for v in by_form.values()) == [6, 6, 6], sorted(by_form)
    for name, body in by_form[0]:
        divisions = len(re.findall(r"\bI2F(?:\.U32)?\.RP\b", body))
        assert divisions == 1, f"{name} (one-element): {divisions} integer divisions"
        assert loads_before_exp2(body) < GROUPED_LOADS, f"{name} (one-element) groups its loads"
    for name, body in by_form[1]:
        loads = loads_before_exp2(body)
        assert loads >= GROUPED_LOADS, f"{name} (grouped): {loads} loads before their exp2"
    for name, body in by_form[2]:
        loads = loads_before_exp2(body)
        assert loads >= ROW_LOADS, f"{name} (a threadgroup a row): {loads} loads before their exp2"
