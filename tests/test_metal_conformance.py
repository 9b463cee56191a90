"""The Metal conformance pass (tests/metal_emu/conformance.py) over every
metal/*.metal file, over each one's flattened JIT text and over the
one-kernel JIT text of its first kernel (what the JIT compiles), its planted
violations (tests/metal_emu/kernels/conformance_fail/, one file a rule), and
the two errors it was written for, in the neighborhood grid header as it was
before the fix."""

import functools
import glob
import os
import re
import subprocess
import sys

import pytest

from metal_emu import conformance

CLANG = conformance.strict_check.find_clang()
pytestmark = pytest.mark.skipif(
    CLANG is None, reason="clang++ is not installed (apt-get install -y clang); CI installs it"
)

ROOT = conformance.REPO_ROOT
SOURCES = sorted(glob.glob(os.path.join(ROOT, "metal", "*.metal")))
PLANTED_DIR = os.path.join(conformance.strict_check.EMU_DIR, "kernels", "conformance_fail")
PLANTED = sorted(glob.glob(os.path.join(PLANTED_DIR, "*.metal")))
# The last commit with `long long` and unqualified pointers in na_grid.h.
PRE_FIX = "862c4b6"
NA_GRID = "mlx_fused_attn/kernels/na_grid.h"


@functools.lru_cache(maxsize=None)
def _report(path, include_dirs=()):
    return conformance.check(path, CLANG, include_dirs)


def _describe(report):
    return "\n".join(str(f) for f in report.findings)


def _name(path):
    return os.path.relpath(path, ROOT)


@pytest.fixture(scope="module")
def flattened_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("flattened"))


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_source_conforms(path):
    report = _report(path)
    assert not report.findings, _describe(report)


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_flattened_source_conforms(path, flattened_dir):
    report = _report(conformance.flattened(path, flattened_dir))
    assert not report.findings, _describe(report)


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_one_kernel_text_conforms(path, flattened_dir):
    """The text the JIT compiles for one kernel: the family's without its
    instantiation list, plus the line that defines the kernel."""
    names = subprocess.run(
        [sys.executable, conformance.FLATTEN, "-I", ROOT, "--list-instances", path],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    report = _report(conformance.flattened(path, flattened_dir, kernel=names[0]))
    assert not report.findings, _describe(report)
    assert names[0] in report.threadgroup_bytes, sorted(report.threadgroup_bytes)


# Kernels beside threadgroup-memory kernels that declare none: the combine
# of split keys, one thread an output element (metal/attention.metal).
NO_THREADGROUP_MEMORY = ("fa_split_combine_",)


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_threadgroup_memory_is_counted(path):
    # Guards the threadgroup-memory rule against passing by finding nothing:
    # every kernel of a file that declares threadgroup arrays is sized.
    report = _report(path)
    assert report.threadgroup_bytes, "no kernels found"
    with open(path) as fh:
        declares = "FA_SHARED_ARRAY_DECL" in fh.read()
    for host, size in report.threadgroup_bytes.items():
        expected = declares and not host.startswith(NO_THREADGROUP_MEMORY)
        assert (size > 0) == expected, f"{host}: {size} bytes"


@pytest.mark.parametrize("path", PLANTED, ids=os.path.basename)
def test_planted_violation_is_reported(path):
    rule = os.path.basename(path)[: -len(".metal")].replace("_", "-")
    report = _report(path)
    assert report.rules == {rule}, _describe(report)
    with open(path) as fh:
        marked = {n for n, line in enumerate(fh, 1) if "// FORBIDDEN" in line}
    assert {f.line for f in report.findings} == marked, _describe(report)


def test_every_rule_has_a_planted_violation():
    planted = {os.path.basename(p)[: -len(".metal")].replace("_", "-") for p in PLANTED}
    assert planted == set(conformance.RULES) - {"compile"}


def test_pre_fix_na_grid_fails(tmp_path):
    old = subprocess.run(
        ["git", "-C", ROOT, "show", f"{PRE_FIX}:{NA_GRID}"], capture_output=True, text=True
    )
    if old.returncode != 0:
        pytest.skip(f"commit {PRE_FIX} is not in this clone: {old.stderr.strip()}")
    shadow = tmp_path / NA_GRID
    shadow.parent.mkdir(parents=True)
    shadow.write_text(old.stdout)
    report = _report(os.path.join(ROOT, "metal", "neighborhood.metal"), (str(tmp_path),))
    assert report.rules == {"long-long", "address-space"}, _describe(report)
    lines = _describe(report)
    assert all(f.path == str(shadow) for f in report.findings), lines
    assert re.search(r"\[long-long\] 'batch_heads' has type 'long long'", lines), lines
    assert re.search(r"\[address-space\] 'axes' has type 'const (fa::)?NaAxis \*'", lines), lines
    assert re.search(r"\[address-space\] 'warps' has type 'const int \*'", lines), lines
