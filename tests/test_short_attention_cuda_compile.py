"""The CUDA short-sequence kernels compile, on a machine without a GPU.

- short_attention_aot.cu builds with nvcc for sm_80 and sm_90a (the AOT
  targets) at every head dim of FA_SHORT_ATTENTION_HEAD_DIMS, each object
  holding every dtype and capacity with the tiles the chooser gives.
- The JIT source, flattened from the kernel sources cmake/cuda.cmake embeds
  (FA_CUDA_KERNEL_SOURCES), instantiates short kernels of every dtype, head
  dim and capacity by the exact expressions the host hands to NVRTC
  (short_attention_names.h, printed by a small host program, which must name
  one kernel per dtype, head dim and capacity); and NVRTC itself compiles
  one, where libnvrtc is installed.

The nvcc and NVRTC helpers are test_cuda_compile.py's. Skips without nvcc.
"""

import ctypes
import os
import re
import shutil
import subprocess
import sys

import pytest

from test_cuda_compile import (
    ARCHS,
    CUDA_DIR,
    NVCC,
    REPO,
    cuda_include_dir,
    gencode,
    load_nvrtc,
    nvcc,
)

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found (no CUDA toolkit)")

CONFIG = os.path.join(REPO, "mlx_fused_attn", "kernels", "short_attention_config.h")


def listed(macro):
    """The numbers of an X-macro list in short_attention_config.h."""
    with open(CONFIG) as fh:
        line = re.search(rf"^#define {macro}\(X\)(.*)$", fh.read(), re.M).group(1)
    return [int(x) for x in re.findall(r"X\((\d+)\)", line)]


@pytest.mark.parametrize("head_dim", listed("FA_SHORT_ATTENTION_HEAD_DIMS"))
def test_short_attention_aot_object(tmp_path, head_dim):
    nvcc(
        *gencode(ARCHS),
        "--threads=2",
        f"-DFA_SHORT_AOT_HEAD_DIM={head_dim}",
        "-c",
        os.path.join(CUDA_DIR, "short_attention_aot.cu"),
        "-o",
        str(tmp_path / "short.o"),
    )


def test_short_attention_aot_rejects_unknown_head_dim(tmp_path):
    cmd = [NVCC, "-std=c++17", f"-I{REPO}", *gencode(["90"]), "-DFA_SHORT_AOT_HEAD_DIM=80", "-c",
           os.path.join(CUDA_DIR, "short_attention_aot.cu"), "-o", str(tmp_path / "x.o")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode != 0 and "FA_SHORT_ATTENTION_HEAD_DIMS" in r.stderr + r.stdout


def jit_source():
    """The text cmake/cuda.cmake embeds for NVRTC."""
    with open(os.path.join(REPO, "cmake", "cuda.cmake")) as fh:
        files = re.search(r"set\(FA_CUDA_KERNEL_SOURCES(.*?)\)", fh.read(), re.S).group(1).split()
    sources = [f.replace("${FA_CUDA_DIR}", CUDA_DIR) for f in files]
    assert os.path.join(CUDA_DIR, "short_attention_kernel.cuh") in sources
    sys.path.insert(0, os.path.join(REPO, "metal"))
    try:
        import flatten_source
    finally:
        sys.path.pop(0)
    return flatten_source.flatten(sources, [REPO])


def short_expressions(tmp_path):
    """Every short kernel expression the host can hand to NVRTC."""
    program = tmp_path / "names.cpp"
    program.write_text(
        "#include <cstdio>\n"
        '#include "mlx_fused_attn/backend/cuda/short_attention_names.h"\n'
        "using namespace mlx_fused_attn::cuda;\n"
        "int main() {\n"
        "  const fa::DType types[] = {fa::DType::Float16, fa::DType::BFloat16,"
        " fa::DType::Float32};\n"
        "  for (fa::DType t : types)\n"
        "    for (int d = 1; d <= 256; ++d)\n"
        "      for (int l = 1; l <= 64; ++l)\n"
        "        if (fa::short_attention_covers(l, l, d, d, t, fa::Backend::Cuda)"
        " && fa::short_attention_seq(l, l) == l)\n"
        '          std::printf("%s\\n", short_attention_kernel_expression({t, d, l}).c_str());\n'
        "}\n"
    )
    exe = tmp_path / "names"
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    subprocess.run([cxx, "-std=c++17", f"-I{REPO}", str(program), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()


def test_jit_source_holds_the_short_kernels(tmp_path):
    exprs = short_expressions(tmp_path)
    dims, seqs = listed("FA_SHORT_ATTENTION_HEAD_DIMS"), listed("FA_SHORT_ATTENTION_SEQS")
    assert len(exprs) == 3 * len(dims) * len(seqs), exprs
    # The AOT objects instantiate every kernel; here a spread of them (every
    # dtype, head dim and capacity appears) checks the host's expressions
    # against the flattened source.
    probes = "".join(
        f"const void* fa_short_probe_{i} = reinterpret_cast<const void*>(&{e});\n"
        for i, e in enumerate(exprs[::5])
    )
    unit = tmp_path / "jit_unit.cu"
    unit.write_text(jit_source() + probes)
    nvcc(*gencode(["90a"]), "--threads=2", "-c", str(unit), "-o", str(tmp_path / "jit_unit.o"))


def test_nvrtc_compiles_a_short_kernel(tmp_path):
    nvrtc = load_nvrtc()
    if nvrtc is None:
        pytest.skip("libnvrtc not installed (pip install '.[test-cuda]')")
    expr = [e for e in short_expressions(tmp_path) if e.startswith("fa::short_attention_kernel<fa::bfloat_t, 64, 32,")][0]
    # The options of nvrtc_compiler.cpp.
    options = [b"--gpu-architecture=sm_90a", b"--include-path=" + cuda_include_dir().encode(),
               b"--std=c++17", b"-default-device", b"-DNDEBUG"]
    prog = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), jit_source().encode(), b"jit.cu", 0, None, None) == 0
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
    assert lowered.value.startswith(b"_ZN2fa22short_attention_kernel")
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
