"""The benchmark sweeps (benchmarks/cuda_*_sweep.cu, cuda_bwd_bench.cu)
still build, on a machine without a GPU: they instantiate
the kernels with their template arguments spelled out, so a change to a
kernel's signature or tiles that the library's own instances follow could
otherwise leave them broken until the next device run. Each builds as its header says it is built on the GPU
machine; the tile sweep and the backward's in their quick forms
(-DFA_SWEEP_QUICK: the same code over fewer tiles, for CI's time).

Skips with the reason when nvcc is absent."""

import os

import pytest

from test_cuda_compile import NVCC, REPO, nvcc

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found (no CUDA toolkit)")

SWEEPS = [
    ("cuda_tile_sweep.cu", ["-gencode=arch=compute_90a,code=sm_90a", "-DFA_SWEEP_QUICK"]),
    ("cuda_na_sweep.cu", ["-arch=sm_90"]),
    ("cuda_short_sweep.cu", ["-arch=sm_90"]),
    ("cuda_bwd_bench.cu", ["-gencode=arch=compute_90a,code=sm_90a", "-DFA_SWEEP_QUICK"]),
    ("cuda_mask_sweep.cu", ["-gencode=arch=compute_90a,code=sm_90a"]),
    ("cuda_decode_sweep.cu", ["-gencode=arch=compute_90a,code=sm_90a"]),
    ("cuda_quant_decode_sweep.cu", ["-gencode=arch=compute_90a,code=sm_90a"]),
]


@pytest.mark.parametrize(
    "source, flags", SWEEPS, ids=[f"{s}{' quick' if len(f) > 1 else ''}" for s, f in SWEEPS]
)
def test_sweep_builds(tmp_path, source, flags):
    exe = tmp_path / "sweep"
    nvcc(*flags, os.path.join(REPO, "benchmarks", source), "-o", str(exe))
    assert exe.is_file() and exe.stat().st_size > 0, f"nvcc left no executable for {source}"
