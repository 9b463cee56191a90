"""The combine kernels of split keys (the general kernel's and the quantized
one's, kernels/split_keys.h's split_combine_element) take an element's row
and column from one integer division: through split_combine_elements<1>
the column took two more (`% D_v` before the merge and at the store), which
with the split rows' offsets recomputed at each split made the combine run
14% more instructions a thread at 4 splits: the H100 A/B's 1.021 of chunked
prefill (128 queries against 4096 keys, 4 splits, a combine of 2048
threadgroups), the one call of the table whose combine is large beside its
forward. This compiles the combine kernels of every dtype
(sm_90a) and counts, in each one's SASS, the reciprocal that starts an
integer division by a value known only at run time (I2F.RP or
I2F.U32.RP, then MUFU.RCP). Skips without nvcc or nvdisasm."""

import re
import subprocess

import pytest

from test_cuda_compile import nvcc_output
from test_producer_sass_compile import find_nvdisasm

KERNELS = (
    '#include "mlx_fused_attn/families/attention/attention_kernel.cuh"\n'
    '#include "mlx_fused_attn/families/quantized_attention/quantized_attention_kernel.cuh"\n'
    "const void* kernels[] = {\n"
    + "".join(
        f"    (const void*)fa::{kernel}<{t}>,\n"
        for kernel in ("split_combine_kernel", "quantized_split_combine_kernel")
        for t in ("fa::half_t", "fa::bfloat_t", "float")
    )
    + "};\n"
)


def test_combine_divides_once(tmp_path):
    nvdisasm = find_nvdisasm()
    if nvdisasm is None:
        pytest.skip("nvdisasm not found")
    cubin = nvcc_output(tmp_path, KERNELS, "cubin", "sm_90a")
    sass = subprocess.run([nvdisasm, str(cubin)], check=True, capture_output=True, text=True).stdout
    functions = re.split(r"\n//-+ \.text\.", sass)[1:]
    assert len(functions) == 6
    for body in functions:
        name = body.splitlines()[0].strip()
        divisions = re.findall(r"\bI2F(?:\.U32)?\.RP\b", body)
        assert len(divisions) == 1, f"{name}: {len(divisions)} integer divisions"
