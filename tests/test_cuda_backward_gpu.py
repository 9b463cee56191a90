"""The backward's CUDA kernels on a GPU, before the host launches them: the
forward kernel writes O and the LSE (has_lse), then D, dK/dV and dQ run
(two kernels; then the one-kernel form: dK/dV accumulating dQ through
atomics, and the conversion), and every gradient of a few cases (fp16, bf16, fp32; causal or not; ragged
blocks) is checked against a plain fp32 reference kernel
(benchmarks/cuda_bwd_bench.cu's `check` mode). Needs nvcc and an NVIDIA
GPU; skips without them."""

import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def gpu_arch():
    """The first GPU's compute capability as nvcc spells it ("90a"), or None."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    r = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        return None
    cap = r.stdout.split()[0].replace(".", "")
    return cap + "a" if cap == "90" else cap


ARCH = gpu_arch()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(NVCC is None or ARCH is None, reason="needs nvcc and an NVIDIA GPU"),
]


def test_backward_kernels_match_the_reference(tmp_path):
    exe = tmp_path / "bwd_bench"
    build = subprocess.run(
        [NVCC, "-std=c++17", "-O3", f"-gencode=arch=compute_{ARCH},code=sm_{ARCH}", f"-I{REPO}",
         os.path.join(REPO, "benchmarks", "cuda_bwd_bench.cu"), "-o", str(exe)],
        capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe), "check"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    # Four cases, three gradients each, in both forms of the backward.
    assert run.stdout.count("ok ") == 24, run.stdout
