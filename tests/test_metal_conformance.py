"""The Metal conformance pass (tests/metal_emu/conformance.py) over every
kernel family's .metal file (mlx_fused_attn/families/*/*.metal), over each
one's flattened JIT text and over the one-kernel JIT text of its first
kernel (what the JIT compiles), its planted violations
(tests/metal_emu/kernels/conformance_fail/, at least one file a rule),
the errors Apple's compiler found that it was written for (the
neighborhood grid header at 862c4b6, the program-scope constants at
99b7fa3), and the citations of its vocabulary (metal_vocabulary.py)."""

import functools
import glob
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from metal_emu import conformance, metal_vocabulary

CLANG = conformance.strict_check.find_clang()
pytestmark = pytest.mark.skipif(
    CLANG is None, reason="clang++ is not installed (apt-get install -y clang); CI installs it"
)

ROOT = conformance.REPO_ROOT
SOURCES = sorted(glob.glob(os.path.join(ROOT, "mlx_fused_attn", "families", "*", "*.metal")))
PLANTED_DIR = os.path.join(conformance.strict_check.EMU_DIR, "kernels", "conformance_fail")
PLANTED = sorted(glob.glob(os.path.join(PLANTED_DIR, "*.metal")))
# The last commit with `long long` and unqualified pointers in na_grid.h.
PRE_FIX = "862c4b6"
NA_GRID = "mlx_fused_attn/families/neighborhood/na_grid.h"
# The last commit with program-scope `constexpr int` constants, which Apple's
# compiler rejects ("program scope variable must reside in constant address
# space"), and where they were.
PRE_CONSTANT = "99b7fa3"
PRE_CONSTANT_LINES = {
    "mlx_fused_attn/kernels/attention_config.h": {47: "kProducerWarps", 48: "kProducerSyncBytes"},
    "mlx_fused_attn/families/attention_backward/attention_backward_config.h": {15: "kBwdRowDotWarps"},
}
CHECK_METAL_HOST = os.path.join(os.path.dirname(__file__), "metal_host", "check_metal_host.py")
_PLANTED_RULE = re.compile(r"Must fail the conformance pass with \[([a-z-]+)\] only")


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
# of split keys, one thread an output element
# (mlx_fused_attn/families/attention/attention.metal and
# families/quantized_attention/quantized_attention.metal).
NO_THREADGROUP_MEMORY = ("fa_split_combine_", "fa_quantized_split_combine_")


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


def _planted_rule(path):
    with open(path) as fh:
        m = _PLANTED_RULE.search(fh.read())
    assert m, f"{path}: no 'Must fail the conformance pass with [rule] only' header"
    return m.group(1)


@pytest.mark.parametrize("path", PLANTED, ids=os.path.basename)
def test_planted_violation_is_reported(path):
    report = _report(path)
    assert report.rules == {_planted_rule(path)}, _describe(report)
    with open(path) as fh:
        marked = {n for n, line in enumerate(fh, 1) if "// FORBIDDEN" in line}
    assert {f.line for f in report.findings} == marked, _describe(report)
    assert all(f.path == path for f in report.findings), _describe(report)


def test_every_rule_has_a_planted_violation():
    planted = {_planted_rule(p) for p in PLANTED}
    assert planted == set(conformance.RULES) - {"compile"}


def _shadow(tmp_path, commit, paths):
    """Writes `paths` as they were at `commit` under tmp_path; skips the test
    where the commit is not in this clone."""
    for path in paths:
        old = subprocess.run(
            ["git", "-C", ROOT, "show", f"{commit}:{path}"], capture_output=True, text=True
        )
        if old.returncode != 0:
            pytest.skip(f"commit {commit} is not in this clone: {old.stderr.strip()}")
        shadow = tmp_path / path
        shadow.parent.mkdir(parents=True, exist_ok=True)
        shadow.write_text(old.stdout)


def test_pre_constant_tree_fails(tmp_path):
    # attention_backward.metal includes both headers.
    _shadow(tmp_path, PRE_CONSTANT, PRE_CONSTANT_LINES)
    report = _report(os.path.join(ROOT, "mlx_fused_attn", "families", "attention_backward", "attention_backward.metal"), (str(tmp_path),))
    assert report.rules == {"declaration"}, _describe(report)
    found = {(f.path, f.line) for f in report.findings}
    expected = {
        (str(tmp_path / path), line) for path, lines in PRE_CONSTANT_LINES.items() for line in lines
    }
    assert found == expected, _describe(report)
    for f in report.findings:
        name = PRE_CONSTANT_LINES[os.path.relpath(f.path, tmp_path)][f.line]
        assert f"program-scope variable '{name}'" in f.message, _describe(report)


@functools.lru_cache(maxsize=None)
def _mlx_kernels():
    """The pinned MLX's Metal kernel headers, or the reason they cannot be had."""
    spec = importlib.util.spec_from_file_location("check_metal_host", CHECK_METAL_HOST)
    host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)
    try:
        prefix = host.mlx_metal_prefix(host.pinned_mlx_version())
    except host.Unavailable as e:
        return None, str(e)
    return os.path.join(str(prefix), "include", "mlx", "backend", "metal", "kernels"), None


def test_vocabulary_cites_real_mlx_lines():
    kernels, reason = _mlx_kernels()
    if kernels is None:
        pytest.skip(reason)
    cited = [
        (what, c) for what, c in metal_vocabulary.citations() if isinstance(c, metal_vocabulary.Mlx)
    ]
    assert cited
    wrong = []
    for what, cite in cited:
        assert "_nax" not in cite.path, f"{what}: {cite} is a Metal 4 kernel"
        with open(os.path.join(kernels, cite.path)) as fh:
            lines = fh.read().splitlines()
        if cite.line > len(lines) or cite.snippet not in lines[cite.line - 1]:
            wrong.append(f"{what}: {cite}")
    assert not wrong, "\n".join(wrong)


def test_vocabulary_entries_cite_something():
    for what, cite in metal_vocabulary.citations():
        assert isinstance(cite, (metal_vocabulary.Spec, metal_vocabulary.Mlx)), what
        assert str(cite).strip(), what


def test_pre_fix_na_grid_fails(tmp_path):
    _shadow(tmp_path, PRE_FIX, [NA_GRID])
    shadow = tmp_path / NA_GRID
    report = _report(os.path.join(ROOT, "mlx_fused_attn", "families", "neighborhood", "neighborhood.metal"), (str(tmp_path),))
    assert report.rules == {"type", "address-space"}, _describe(report)
    lines = _describe(report)
    assert all(f.path == str(shadow) for f in report.findings), lines
    assert re.search(r"\[type\] 'batch_heads' has type 'long long'", lines), lines
    assert re.search(r"\[address-space\] 'axes' has type 'const (fa::)?NaAxis \*'", lines), lines
    assert re.search(r"\[address-space\] 'warps' has type 'const int \*'", lines), lines


@pytest.mark.parametrize(
    "printed, builtins",
    [
        ("const __attribute__((address_space(1))) _Float16 *", ["_Float16"]),
        ("metal::vec<long long, 2>", ["long long"]),
        ("unsigned __int128", ["unsigned __int128"]),
        ("__SVInt8_t", ["__SVInt8_t"]),
        ("conditional_t<1 == 2, float, unsigned int>", ["float", "unsigned int"]),
    ],
)
def test_builtin_types_are_read_off_printed_types(printed, builtins):
    # The type rule allows builtin types by name, so a type it cannot read
    # must show up as a name that is not in the vocabulary.
    assert conformance._builtin_types(printed) == builtins
