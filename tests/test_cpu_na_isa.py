"""The generic and AVX2 builds of the CPU neighborhood kernel agree
(tests/cpu_host/na_isa_agree.cpp). The other tests reach only the build the
processor picks, AVX2 on CI, so the generic one is checked here: both are
compiled from the package's sources with the flags CMakeLists.txt gives them.

Skips where g++ is missing or the processor is not x86-64 with AVX2."""

import pathlib
import platform
import re
import shutil
import subprocess

import mlx
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CPU = ROOT / "mlx_fused_attn" / "backend" / "cpu"
COMMON = ["-std=c++20", "-O3", "-fno-math-errno", "-fno-trapping-math"]
AVX2 = ["-mavx2", "-mfma", "-mf16c"]


def has_avx2():
    try:
        return " avx2 " in pathlib.Path("/proc/cpuinfo").read_text().replace("\n", " ")
    except OSError:
        return False


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64") or not has_avx2() or shutil.which("g++") is None,
    reason="needs g++ on an x86-64 processor with AVX2",
)
def test_generic_and_avx2_builds_agree(tmp_path):
    include = ["-I", str(ROOT), "-I", str(pathlib.Path(mlx.__path__[0]) / "include")]

    def compile_object(source, flags):
        obj = tmp_path / (source.stem + ".o")
        subprocess.run(["g++", *COMMON, *flags, *include, "-c", str(source), "-o", str(obj)], check=True)
        return str(obj)

    objects = [
        compile_object(CPU / "kernel_generic.cpp", []),
        compile_object(CPU / "kernel_avx2.cpp", AVX2),
    ]
    exe = tmp_path / "na_isa_agree"
    subprocess.run(
        ["g++", *COMMON, *include, str(ROOT / "tests" / "cpu_host" / "na_isa_agree.cpp"),
         str(CPU / "thread_pool.cpp"), *objects, "-o", str(exe), "-lpthread"],
        check=True,
    )
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(re.findall(r"^ok ", r.stdout, re.M)) == 8, r.stdout
