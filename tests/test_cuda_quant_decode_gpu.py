"""The quantized kernel's variants on a GPU against the bf16 decode of the
same cache dequantized (benchmarks/cuda_quant_decode_sweep.cu): the plan's
tiles and the decode tiles (choose_quantized_decode_tiles), each with the
loader's chunk policies (quantized_block_loader.h's QuantizedFloatChunks,
and tile/cuda_quantized_chunks.h's 16-bit pairs, 16-byte word loads and
row-major placement), split kernel and combine, then the one kernel, at
B = 1, 4096 keys. A variant that reads, places or dequantizes a block
wrong moves its output by far more than the sweep's 1e-2 (its header says
why) and prints WRONG. Needs nvcc and an sm_90 GPU (the bf16 reference is
a wgmma kernel); skips without them."""

import os
import subprocess

import pytest

from test_cuda_backward_gpu import ARCH, NVCC, REPO

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(NVCC is None or ARCH != "90a", reason="needs nvcc and an sm_90 GPU"),
]

# The sweep's quantized rows of a case whose plan splits its keys: the
# plan, its halved and doubled splits, the one-stage schedule, and three
# chunk policies; the decode tiles at two split counts, each chunk policy
# at the larger and the last also at the smaller.
ROWS = 13


def test_quantized_variants_match_the_bf16_decode(tmp_path):
    exe = tmp_path / "quant_decode_sweep"
    build = subprocess.run(
        [NVCC, "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a", f"-I{REPO}",
         os.path.join(REPO, "benchmarks", "cuda_quant_decode_sweep.cu"), "-o", str(exe)],
        capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr
    # Case 1: B = 1, H = 32 / 8, 4096 keys.
    run = subprocess.run([str(exe), "1"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [line for line in run.stdout.splitlines() if " err " in line]
    assert len(rows) == ROWS, run.stdout
    assert all(line.rstrip().endswith(" ok") for line in rows), run.stdout
