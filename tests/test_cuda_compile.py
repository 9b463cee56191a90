"""The CUDA kernels compile, on a machine without a GPU.

- Every CUDA source (attention_aot.cu, aot_kernels.cu) builds with nvcc for
  sm_80 and sm_90a (Hopper with its warpgroup products), the AOT targets;
  attention_aot.cu for a subset of head dim pairs (each builds up to 36
  kernels).
- The JIT source is what NVRTC will see: the kernel headers flattened by
  metal/flatten_source.py, self-contained. It builds with nvcc as a
  standalone translation unit, instantiating kernels by the exact
  expressions the host code hands to NVRTC (kernel_names.h, printed by a
  small host program); and, where libnvrtc is installed (pip's
  nvidia-cuda-nvrtc), with NVRTC itself under the options the library uses.

Skips with the reason when nvcc is absent.
"""

import ctypes
import glob
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUDA_DIR = os.path.join(REPO, "mlx_fused_attn", "backend", "cuda")
ARCHS = ["80", "90a"]
# The (q and k, v) head dims whose AOT object is built here: the smallest,
# 128 (Q in shared memory on Hopper's large grids), 72 (padded to whole k16
# steps), and each pair past 128 (the most registers; v narrower than q).
AOT_HEAD_DIMS = [(32, 32), (72, 72), (128, 128), (192, 128), (192, 192), (256, 256)]
N_HEAD_DIMS = 9  # FA_ATTENTION_HEAD_DIMS
JIT_SOURCES = ["attention_kernel.cuh", "strided_copy_kernel.cuh", "poison_kernel.cuh"]


def find_nvcc():
    for candidate in [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]:
        if candidate and os.path.exists(candidate):
            return candidate
    return None


NVCC = find_nvcc()
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found (no CUDA toolkit)")


def nvcc(*args, cwd=None):
    cmd = [NVCC, "-std=c++17", "-O3", f"-I{REPO}", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}\n{r.stderr}"
    return r


def gencode(archs):
    return [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]


@pytest.mark.parametrize("head_dim,head_dim_v", AOT_HEAD_DIMS)
def test_attention_aot_object(tmp_path, head_dim, head_dim_v):
    nvcc(
        *gencode(ARCHS),
        "--threads=2",
        f"-DFA_AOT_HEAD_DIM={head_dim}",
        f"-DFA_AOT_HEAD_DIM_V={head_dim_v}",
        "-c",
        os.path.join(CUDA_DIR, "attention_aot.cu"),
        "-o",
        str(tmp_path / "attention.o"),
    )


@pytest.mark.parametrize("head_dim,head_dim_v", [(48, 48), (192, 64)])
def test_attention_aot_rejects_unknown_head_dim(tmp_path, head_dim, head_dim_v):
    cmd = [NVCC, "-std=c++17", f"-I{REPO}", *gencode(["90"]), f"-DFA_AOT_HEAD_DIM={head_dim}",
           f"-DFA_AOT_HEAD_DIM_V={head_dim_v}", "-c",
           os.path.join(CUDA_DIR, "attention_aot.cu"), "-o", str(tmp_path / "x.o")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode != 0 and "FA_ATTENTION_HEAD_DIMS" in r.stderr + r.stdout


def test_helper_kernels_object(tmp_path):
    nvcc(*gencode(ARCHS), "--threads=2", "-c", os.path.join(CUDA_DIR, "aot_kernels.cu"),
         "-o", str(tmp_path / "aot_kernels.o"))


def flattened_source():
    sys.path.insert(0, os.path.join(REPO, "metal"))
    try:
        import flatten_source
    finally:
        sys.path.pop(0)
    return flatten_source.flatten([os.path.join(CUDA_DIR, s) for s in JIT_SOURCES], [REPO])


def kernel_expressions(tmp_path):
    """Every expression the host hands to NVRTC, from kernel_names.h."""
    program = tmp_path / "names.cpp"
    program.write_text(
        "#include <cstdio>\n"
        '#include "mlx_fused_attn/backend/cuda/kernel_names.h"\n'
        "using namespace mlx_fused_attn::cuda;\n"
        "int main() {\n"
        "  const fa::DType types[] = {fa::DType::Float16, fa::DType::BFloat16,"
        " fa::DType::Float32};\n"
        "  for (fa::DType t : types) {\n"
        "#define FA_PRINT(d, dv) \\\n"
        "    for (int v = 0; v < 12; ++v) std::printf(\"%s\\n\","
        " attention_kernel_expression({t, d, dv, v % 3 == 1, v % 3 == 2, v % 6 >= 3,"
        " v >= 6}).c_str());\n"
        "    FA_ATTENTION_HEAD_DIMS(FA_PRINT)\n"
        "    std::printf(\"%s\\n\", strided_copy_kernel_expression(t).c_str());\n"
        "  }\n"
        "  std::printf(\"%s\\n\", poison_kernel_expression().c_str());\n"
        "}\n"
    )
    exe = tmp_path / "names"
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    subprocess.run([cxx, "-std=c++17", f"-I{REPO}", str(program), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split("\n")[:-1]


def test_jit_source_is_self_contained(tmp_path):
    exprs = kernel_expressions(tmp_path)
    assert len(exprs) == 3 * N_HEAD_DIMS * 12 + 3 + 1, exprs
    # One attention kernel per dtype and variant, spread over the head dims,
    # plus the helpers: what NVRTC compiles, taken by the same expressions.
    attention = [e for e in exprs if e.startswith("fa::attention_kernel<")]
    subset = attention[0::4] + [e for e in exprs if not e.startswith("fa::attention_kernel<")]
    source = flattened_source()
    assert source.isascii()
    probes = "".join(
        f"const void* fa_probe_{i} = reinterpret_cast<const void*>(&{e});\n"
        for i, e in enumerate(subset)
    )
    unit = tmp_path / "jit_unit.cu"
    unit.write_text(source + probes)
    nvcc(*gencode(["90a"]), "-c", str(unit), "-o", str(tmp_path / "jit_unit.o"))


def load_nvrtc():
    """libnvrtc from pip's nvidia-cuda-nvrtc, or the system; None if absent."""
    dirs = []
    try:
        import nvidia  # namespace package of NVIDIA's wheels

        for base in nvidia.__path__:
            dirs += [os.path.join(base, "cu13", "lib"), os.path.join(base, "cuda_nvrtc", "lib")]
    except ImportError:
        pass
    for d in dirs:
        libs = sorted(glob.glob(os.path.join(d, "libnvrtc.so.*")))
        builtins = sorted(glob.glob(os.path.join(d, "libnvrtc-builtins.so.*")))
        if libs and builtins:
            # NVRTC opens its builtins by name: load them first.
            ctypes.CDLL(builtins[0], mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(libs[0], mode=ctypes.RTLD_GLOBAL)
    try:
        return ctypes.CDLL("libnvrtc.so", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None


def cuda_include_dir():
    """Where cuda_bf16.h is, searched as nvrtc_compiler.cpp searches."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
             os.path.dirname(os.path.dirname(os.path.realpath(NVCC))), "/usr/local/cuda"]
    for root in filter(None, roots):
        if os.path.exists(os.path.join(root, "include", "cuda_bf16.h")):
            return os.path.join(root, "include")
    pytest.skip("no CUDA headers (cuda_bf16.h) found for NVRTC")


def test_nvrtc_compiles_the_jit_source(tmp_path):
    nvrtc = load_nvrtc()
    if nvrtc is None:
        pytest.skip("libnvrtc not installed (pip install '.[test-cuda]')")
    source = flattened_source().encode()
    # A causal bf16 attention kernel with each kind of product (mma.sync;
    # wgmma with Q in registers at D = 64; wgmma with Q in shared memory at
    # D = 128, for a grid of one wave and past it) and a helper, by the
    # host's expressions.
    names = kernel_expressions(tmp_path)
    d128 = [e for e in names if e.startswith("fa::attention_kernel<fa::bfloat_t, 128,")]
    d64 = [e for e in names if e.startswith("fa::attention_kernel<fa::bfloat_t, 64,")]
    exprs = [d128[1], d64[4], d128[4], d128[10], names[-1]]
    assert ", false, false, true, false>" in d128[1], d128[1]
    assert ", true, false, true, false>" in d64[4], d64[4]
    assert ", true, true, true, false>" in d128[4] and d128[4] != d128[10], d128
    # The head dims past 128 and the padded 72, with warpgroup products
    # (causal; a mask) and fp32's 3xTF32 mma.sync.
    for prefix, variants in [
        ("fa::half_t, 72, 72,", [4]),
        ("fa::bfloat_t, 192, 128,", [4, 2]),
        ("fa::half_t, 192, 192,", [4]),
        ("fa::bfloat_t, 256, 256,", [4]),
        ("float, 256, 256,", [1]),
    ]:
        found = [e for e in names if e.startswith(f"fa::attention_kernel<{prefix}")]
        assert len(found) == 12, (prefix, found)
        exprs += [found[i] for i in variants]
    # The options of nvrtc_compiler.cpp on Hopper.
    options = [b"--gpu-architecture=sm_90a", b"--include-path=" + cuda_include_dir().encode(),
               b"--std=c++17", b"-default-device", b"-DNDEBUG"]
    for expr in exprs:
        prog = ctypes.c_void_p()
        assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, b"jit.cu", 0, None, None) == 0
        assert nvrtc.nvrtcAddNameExpression(prog, expr.encode()) == 0
        opts = (ctypes.c_char_p * len(options))(*options)
        result = nvrtc.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        assert result == 0, f"{expr}:\n{log.value.decode()}"
        lowered = ctypes.c_char_p()
        assert nvrtc.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(lowered)) == 0
        assert lowered.value.startswith(b"_ZN2fa")
        nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        assert size.value > 0
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
