"""The negative control of the Metal conformance pass: MLX's own Metal
kernels, which Apple's compiler builds every MLX release, instantiated in
tests/metal_emu/mlx_kernels/ against the kernel headers of the MLX version
pyproject.toml pins (its mlx-metal wheel, tests/metal_host/check_metal_host.py).
The pass must report nothing on them: a finding there is a rule that rejects
what Apple compiles. Each unit must also compile in the strict library and
instantiate the kernels it is for, so that the control cannot pass by
checking nothing.

Skips only where clang++ is missing or PyPI is unreachable."""

import collections
import functools
import glob
import importlib.util
import os

import pytest

from metal_emu import conformance, gen_trampoline, strict_check

CLANG = strict_check.find_clang()
pytestmark = pytest.mark.skipif(
    CLANG is None, reason="clang++ is not installed (apt-get install -y clang); CI installs it"
)

UNIT_DIR = os.path.join(strict_check.EMU_DIR, "mlx_kernels")
UNITS = sorted(glob.glob(os.path.join(UNIT_DIR, "*.metal")))
CHECK_METAL_HOST = os.path.join(os.path.dirname(__file__), "metal_host", "check_metal_host.py")
# The [[kernel]] templates each unit instantiates, and how many times.
KERNELS = {
    "steel_attention.metal": {"attention": 6},
}


def _load_check_metal_host():
    spec = importlib.util.spec_from_file_location("check_metal_host", CHECK_METAL_HOST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=None)
def _mlx_include():
    """The include directory of the pinned MLX's kernel headers, or the
    reason they cannot be had here."""
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


def _describe(report):
    return "\n".join(str(f) for f in report.findings)


def test_every_unit_is_listed():
    assert {os.path.basename(p) for p in UNITS} == set(KERNELS)


@pytest.mark.parametrize("path", UNITS, ids=os.path.basename)
def test_unit_compiles(path, mlx_include):
    report = _report(path, mlx_include)
    assert "compile" not in report.rules, _describe(report)


@pytest.mark.parametrize("path", UNITS, ids=os.path.basename)
def test_unit_instantiates_its_kernels(path, mlx_include):
    ok, pre = strict_check.preprocess(path, CLANG, (mlx_include,))
    assert ok, pre
    program = gen_trampoline.parse(pre, strict_check.INTERNAL)
    templates = {k.name for k in program.kernels if k.is_template}
    instances = collections.Counter(i.base for i in program.instances)
    assert set(instances) <= templates, (instances, templates)
    assert instances == KERNELS[os.path.basename(path)]
    # Every kernel here declares threadgroup memory, so each one the pass
    # finds in the AST is sized above zero.
    sizes = _report(path, mlx_include).threadgroup_bytes
    assert sizes and all(size > 0 for size in sizes.values()), sizes
    assert set(sizes) <= {i.host_name for i in program.instances}, sizes


@pytest.mark.parametrize("path", UNITS, ids=os.path.basename)
def test_pass_reports_nothing(path, mlx_include):
    report = _report(path, mlx_include)
    assert not report.findings, _describe(report)
