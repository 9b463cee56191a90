"""The negative control of the Metal conformance pass: MLX's own Metal
kernels, which Apple's compiler builds every MLX release, instantiated in
tests/metal_emu/mlx_kernels/ against the kernel headers of the MLX version
pyproject.toml pins (its mlx-metal wheel, tests/metal_host/check_metal_host.py).
The pass must report nothing on them: a finding there is a rule that rejects
what Apple compiles. Each unit must also compile in the strict library and
instantiate the kernels it is for, and the pass must size every one of them,
so that the control cannot pass by checking nothing.

Skips only where clang++ is missing or PyPI is unreachable."""

import collections
import functools
import glob
import importlib.util
import os
import re

import pytest

from metal_emu import conformance, metal_source, strict_check

CLANG = strict_check.find_clang()
pytestmark = pytest.mark.skipif(
    CLANG is None, reason="clang++ is not installed (apt-get install -y clang); CI installs it"
)

UNIT_DIR = os.path.join(strict_check.EMU_DIR, "mlx_kernels")
UNITS = sorted(glob.glob(os.path.join(UNIT_DIR, "*.metal")))
CHECK_METAL_HOST = os.path.join(os.path.dirname(__file__), "metal_host", "check_metal_host.py")
# The [[kernel]] templates each unit instantiates, and how many times.
KERNELS = {
    "gemv.metal": {"gemv": 3, "gemv_t": 3},
    "reduce.metal": {
        "init_reduce": 2,
        "all_reduce": 2,
        "row_reduce_small": 2,
        "row_reduce_looped": 2,
        "row_reduce_simple": 2,
        "col_reduce_small": 2,
        "col_reduce_longcolumn": 2,
        "col_reduce_looped": 2,
        "col_reduce_2pass": 2,
    },
    "sdpa_vector.metal": {
        "sdpa_vector": 3,
        "sdpa_vector_2pass_1": 3,
        "sdpa_vector_2pass_1_gqa": 1,
        "sdpa_vector_2pass_2": 3,
    },
    "softmax.metal": {"softmax_single_row": 5, "softmax_looped": 5},
    "steel_attention.metal": {"attention": 6},
    "steel_gemm_fused.metal": {"gemm": 4},
}
# Kernels that declare no threadgroup memory (every other one does).
NO_THREADGROUP_MEMORY = {"init_reduce", "row_reduce_small", "sdpa_vector_2pass_1"}
# Units that Apple compiles and the strict library cannot: the reason.
STRICT_LIBRARY_CANNOT = {
    "steel_gemm_fused.metal": "steel/gemm/loader.h:77 assigns a struct (ReadVector) "
    "through a threadgroup pointer; stock clang has no address space for `this` outside "
    "OpenCL, so the implicit assignment operator cannot be called on an object in "
    "threadgroup memory",
}
_INSTANCE = re.compile(
    r'template\s*\[\[\s*host_name\(((?:\s*"[^"]*")+)\s*\)\s*\]\]\s*\[\[\s*kernel\s*\]\]\s*'
    r"decltype\(\s*([A-Za-z_]\w*)\s*<"
)


def _load_check_metal_host():
    spec = importlib.util.spec_from_file_location("check_metal_host", CHECK_METAL_HOST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=None)
def _mlx_include():
    """(the include directory of the pinned MLX's kernel headers, None), or
    (None, why they cannot be had here)."""
    host = _load_check_metal_host()
    try:
        return str(host.mlx_metal_prefix(host.pinned_mlx_version()) / "include"), None
    except host.Unavailable as e:
        return None, str(e)


@pytest.fixture(scope="module")
def mlx_include():
    include, reason = _mlx_include()
    if include is None:
        pytest.skip(reason)
    return include


@functools.lru_cache(maxsize=None)
def _report(path, include):
    return conformance.check(path, CLANG, (include,))


@functools.lru_cache(maxsize=None)
def _instances(path, include):
    """{host name: kernel template} of a unit's explicit instantiations."""
    ok, pre = strict_check.preprocess(path, CLANG, (include,))
    assert ok, pre
    code = metal_source.kernel_code(pre, strict_check.INTERNAL)
    return {
        "".join(re.findall(r'"([^"]*)"', names)): template
        for names, template in _INSTANCE.findall(code)
    }


def _describe(report):
    return "\n".join(str(f) for f in report.findings)


def _unit_params():
    return [
        pytest.param(
            path,
            marks=pytest.mark.xfail(reason=STRICT_LIBRARY_CANNOT[name], strict=True)
            if name in STRICT_LIBRARY_CANNOT
            else (),
            id=name,
        )
        for path, name in ((p, os.path.basename(p)) for p in UNITS)
    ]


def test_every_unit_is_listed():
    assert {os.path.basename(p) for p in UNITS} == set(KERNELS)


@pytest.mark.parametrize("path", _unit_params())
def test_unit_compiles(path, mlx_include):
    ok, diagnostics = strict_check.check(path, CLANG, (mlx_include,))
    assert ok, diagnostics


@pytest.mark.parametrize("path", UNITS, ids=os.path.basename)
def test_unit_instantiates_its_kernels(path, mlx_include):
    instances = _instances(path, mlx_include)
    counts = collections.Counter(instances.values())
    assert counts == KERNELS[os.path.basename(path)], instances


@pytest.mark.parametrize("path", UNITS, ids=os.path.basename)
def test_pass_reports_nothing(path, mlx_include):
    report = _report(path, mlx_include)
    assert not report.findings, _describe(report)
    instances = _instances(path, mlx_include)
    assert set(report.threadgroup_bytes) == set(instances), report.threadgroup_bytes
    for host, size in report.threadgroup_bytes.items():
        assert (size > 0) == (instances[host] not in NO_THREADGROUP_MEMORY), (host, size)
