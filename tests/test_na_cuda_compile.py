"""The CUDA neighborhood kernels compile, on a machine without a GPU.

- na_aot.cu builds with nvcc for sm_80 and sm_90a (the AOT targets) once per
  number of spatial axes, as cmake/cuda.cmake builds it; each object holds
  every dtype and head dim.
- The JIT source that cmake/cuda.cmake embeds (its FA_CUDA_KERNEL_SOURCES,
  flattened in that order) instantiates every neighborhood kernel by the
  expression the host hands to NVRTC (na_names.h); and, where libnvrtc is
  installed, NVRTC itself compiles one under the library's options.

Skips with the reason when nvcc is absent. The nvcc and NVRTC helpers are
test_cuda_compile.py's.
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


def na_axes():
    text = open(os.path.join(REPO, "mlx_fused_attn", "kernels", "na_config.h")).read()
    line = re.search(r"^#define FA_NA_AXES\(X\)(.*)$", text, re.M).group(1)
    return [int(n) for n in re.findall(r"X\((\d+)\)", line)]


@pytest.mark.parametrize("n_axes", na_axes())
def test_na_aot_object(tmp_path, n_axes):
    nvcc(
        *gencode(ARCHS),
        "--threads=2",
        f"-DFA_NA_AOT_AXES={n_axes}",
        "-c",
        os.path.join(CUDA_DIR, "na_aot.cu"),
        "-o",
        str(tmp_path / "na.o"),
    )


def test_na_aot_rejects_unknown_axes(tmp_path):
    cmd = [NVCC, "-std=c++17", f"-I{REPO}", *gencode(["90"]), "-DFA_NA_AOT_AXES=4", "-c",
           os.path.join(CUDA_DIR, "na_aot.cu"), "-o", str(tmp_path / "x.o")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode != 0 and "FA_NA_AOT_AXES" in r.stderr + r.stdout


def embedded_sources():
    """FA_CUDA_KERNEL_SOURCES of cmake/cuda.cmake, in order."""
    text = open(os.path.join(REPO, "cmake", "cuda.cmake")).read()
    body = re.search(r"set\(FA_CUDA_KERNEL_SOURCES(.*?)\)", text, re.S).group(1)
    names = re.findall(r"\$\{FA_CUDA_DIR\}/(\S+)", body)
    assert "na_kernel.cuh" in names, names
    return names


def embedded_text():
    """The flattened JIT text, as cmake/cuda.cmake makes it."""
    sys.path.insert(0, os.path.join(REPO, "metal"))
    try:
        import flatten_source
    finally:
        sys.path.pop(0)
    return flatten_source.flatten([os.path.join(CUDA_DIR, s) for s in embedded_sources()], [REPO])


def na_expressions(tmp_path):
    """Every expression the host hands to NVRTC for a neighborhood kernel."""
    program = tmp_path / "names.cpp"
    program.write_text(
        "#include <cstdio>\n"
        '#include "mlx_fused_attn/backend/cuda/na_names.h"\n'
        "using namespace mlx_fused_attn::cuda;\n"
        "int main() {\n"
        "  const fa::DType types[] = {fa::DType::Float16, fa::DType::BFloat16,"
        " fa::DType::Float32};\n"
        "  for (fa::DType t : types) {\n"
        "#define FA_PRINT_D(d) \\\n"
        "    for (int n = 1; n <= 3; ++n)"
        " std::printf(\"%s\\n\", na_kernel_expression({t, d, n}).c_str());\n"
        "    FA_NA_HEAD_DIMS(FA_PRINT_D)\n"
        "  }\n"
        "}\n"
    )
    exe = tmp_path / "names"
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    subprocess.run([cxx, "-std=c++17", f"-I{REPO}", str(program), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()


def test_jit_source_instantiates_every_na_kernel(tmp_path):
    exprs = na_expressions(tmp_path)
    assert len(exprs) == 3 * 3 * 3 and all(e.startswith("fa::na_attention_kernel<") for e in exprs)
    source = embedded_text()
    assert source.isascii()
    probes = "".join(
        f"const void* fa_na_probe_{i} = reinterpret_cast<const void*>(&{e});\n"
        for i, e in enumerate(exprs)
    )
    unit = tmp_path / "jit_unit.cu"
    unit.write_text(source + probes)
    nvcc(*gencode(["90a"]), "--threads=2", "-c", str(unit), "-o", str(tmp_path / "jit_unit.o"))


def test_nvrtc_compiles_a_na_kernel(tmp_path):
    nvrtc = load_nvrtc()
    if nvrtc is None:
        pytest.skip("libnvrtc not installed (pip install '.[test-cuda]')")
    source = embedded_text().encode()
    expr = [e for e in na_expressions(tmp_path) if e.startswith("fa::na_attention_kernel<fa::half_t, 64,")][1]
    # The options of nvrtc_compiler.cpp.
    options = [b"--gpu-architecture=sm_90a", b"--include-path=" + cuda_include_dir().encode(),
               b"--std=c++17", b"-default-device", b"-DNDEBUG"]
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
    assert lowered.value.startswith(b"_ZN2fa19na_attention_kernel")
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
