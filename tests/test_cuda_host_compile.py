"""The host side of the CUDA backend compiles, on a machine without a GPU.

backend/cuda/*.cpp and backend/*.cpp launch the kernels through
MLX's CUDA backend. MLX's wheel ships that backend's headers on every
platform, so the host code can be checked against them here (g++
-fsyntax-only, as CMake builds it: MLX's headers, the CUDA toolkit's, NVRTC's
and the fmt stand-in), with the AOT defines and without, instead of first on
the GPU machine. Linking and running it needs MLX's CUDA build: the GPU
tests do that (benchmarks/gpu_run.sh).

Skips with the reason when the CUDA toolkit headers, NVRTC's header or a C++
compiler are absent.
"""

import glob
import os
import shutil
import subprocess

import mlx.core as mx
import pytest

from test_cuda_compile import cuda_include_dir

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKEND = os.path.join(REPO, "mlx_fused_attn", "backend")
# The CUDA host sources (the backend's and each kernel family's) and the
# backend-independent ones beside them.
SOURCES = (
    sorted(glob.glob(os.path.join(BACKEND, "cuda", "*.cpp")))
    + sorted(glob.glob(os.path.join(REPO, "mlx_fused_attn", "families", "*", "cuda", "*.cpp")))
    + sorted(glob.glob(os.path.join(BACKEND, "*.cpp")))
)
CXX = shutil.which("g++") or shutil.which("clang++")


def mlx_include_dir():
    path = os.path.join(os.path.dirname(mx.__file__), "include")
    if not os.path.exists(os.path.join(path, "mlx", "backend", "cuda", "device.h")):
        pytest.skip("MLX's wheel has no CUDA backend headers")
    return path


def nvrtc_include_dir(toolkit):
    """nvrtc.h from the toolkit or pip's nvidia-cuda-nvrtc, as cmake/cuda.cmake finds it."""
    dirs = [toolkit]
    try:
        import nvidia  # namespace package of NVIDIA's wheels

        dirs += [os.path.join(p, s, "include") for p in nvidia.__path__ for s in ("cu13", "cuda_nvrtc")]
    except ImportError:
        pass
    for d in dirs:
        if os.path.exists(os.path.join(d, "nvrtc.h")):
            return d
    pytest.skip("no nvrtc.h (pip install nvidia-cuda-nvrtc)")


@pytest.mark.skipif(CXX is None, reason="no C++ compiler")
@pytest.mark.parametrize("aot", [True, False], ids=["aot", "jit-only"])
@pytest.mark.parametrize("source", SOURCES, ids=os.path.basename)
def test_host_source_compiles(source, aot):
    toolkit = cuda_include_dir()
    cmd = [
        CXX,
        "-std=c++20",
        "-fsyntax-only",
        "-Wall",
        "-Werror",
        f"-I{REPO}",
        f"-I{mlx_include_dir()}",
        f"-I{toolkit}",
        f"-I{nvrtc_include_dir(toolkit)}",
        f"-I{os.path.join(BACKEND, 'cuda', 'fmt_compat')}",
        f'-DFA_CUDA_TOOLKIT_INCLUDE_DIR="{toolkit}"',
        source,
    ]
    if aot:
        cmd[2:2] = ["-DMLX_FUSED_ATTN_HAS_CUDA_AOT", "-DMLX_FUSED_ATTN_AOT_SM90A"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
