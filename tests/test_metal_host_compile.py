"""The Metal host code (mlx_fused_attn/backend/metal/, the generated JIT
source) compiles on Linux against MLX's macOS headers, and that check fails
on real mistakes: broken copies of a host source, made here by text
substitution, must not compile, with a diagnostic at the broken line.

Skips only where clang++ is missing or PyPI is unreachable."""

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

CHECK = pathlib.Path(__file__).parent / "metal_host" / "check_metal_host.py"


def load_check():
    spec = importlib.util.spec_from_file_location("check_metal_host", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def check(tmp_path_factory):
    """(module, toolchain, host sources)."""
    module = load_check()
    try:
        tc = module.prepare()
    except module.Unavailable as e:
        pytest.skip(str(e))
    sources, problems = module.host_sources(tmp_path_factory.mktemp("build"))
    assert not problems, problems
    return module, tc, sources


def test_metal_host_sources_compile():
    r = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True)
    if r.returncode == 77:
        pytest.skip(r.stderr.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    # The host sources in both configurations of the macOS build, and the
    # generated JIT source (shown by its name alone).
    for line in (
        r"ok +mlx_fused_attn/backend/metal/\S+\.cpp \[jit-only\]",
        r"ok +mlx_fused_attn/backend/metal/\S+\.cpp \[metallib\]",
        r"ok +[^/\s]+\.cpp \[jit-only\]",
    ):
        assert re.search(f"^{line}$", r.stdout, re.M), f"no line /{line}/ in\n{r.stdout}"


def test_check_finds_unbuilt_host_source(tmp_path, monkeypatch):
    """A host source that cmake/metal.cmake does not compile is a problem
    (the macOS build would miss its definitions), and is still checked."""
    module = load_check()
    (tmp_path / "host").mkdir()
    stray = tmp_path / "host" / "stray_metal.cpp"
    stray.write_text("int stray = 0;\n")
    monkeypatch.setattr(module, "HOST_ROOT", tmp_path)
    monkeypatch.setattr(module, "HOST_GLOBS", ("host/*.cpp",))
    sources, problems = module.host_sources(tmp_path)
    assert stray in sources
    assert [p for p in problems if str(stray) in p], problems


# (what, pattern, replacement, the error expected about the broken line)
MISTAKES = [
    (
        "misspelt encoder method",
        r"\benc\.dispatch_threadgroups\(",
        "enc.dispatch_threadgroup(",
        "no member named 'dispatch_threadgroup'",
    ),
    (
        "encoder call missing its buffer index",
        r"\benc\.set_input_array\((\w+), \w+\)",
        r"enc.set_input_array(\1)",
        "too few arguments to function call",
    ),
    (
        "misspelt metal-cpp function-constant type",
        r"\bMTL::DataType::DataTypeBool\b",
        "MTL::DataType::DataTypeBoolean",
        "no member named 'DataTypeBoolean'",
    ),
    (
        "backend/gpu.h function defined under a misspelt name",
        r"\bSupport prepare\(const AttentionPlan",
        "Support prepares(const AttentionPlan",
        "no previous prototype for function 'prepares'",
    ),
    (
        "metallib looked up by family instead of directory",
        r"\bd\.get_library\(name, dir\)",
        "d.get_library(name, p.family)",
        "no matching member function for call to 'get_library'",
    ),
]


def broken_copy(sources, pattern, replacement, tmp_path):
    """The first host source `pattern` occurs in, copied with its first
    occurrence replaced; returns (original, copy, 1-based line of the change)."""
    for source in sources:
        text = source.read_text()
        m = re.search(pattern, text)
        if m:
            copy = tmp_path / source.name
            copy.write_text(text[: m.start()] + m.expand(replacement) + text[m.end() :])
            return source, copy, text.count("\n", 0, m.start()) + 1
    pytest.fail(f"no Metal host source contains /{pattern}/ any more: update MISTAKES")


@pytest.mark.parametrize(
    "what,pattern,replacement,diagnostic", MISTAKES, ids=[m[0] for m in MISTAKES]
)
def test_check_rejects_broken_host_source(
    check, tmp_path, what, pattern, replacement, diagnostic
):
    module, tc, sources = check
    original, copy, line = broken_copy(sources, pattern, replacement, tmp_path)
    r = module.compile_source(tc, copy, tc.configs[0], quote_dir=original.parent)
    assert r.returncode != 0, f"{what}: the broken copy of {original.name} compiled"
    # The error, and a diagnostic (the error or one of its notes) pointing at
    # the broken line: a call spanning lines is reported at its first.
    assert diagnostic in r.stderr and f"{copy}:{line}:" in r.stderr, (
        f"{what}: expected '{diagnostic}' about line {line}:\n{r.stderr}"
    )


def test_check_compiles_each_configuration(check, tmp_path):
    """A mistake only the metallib build compiles is caught in that
    configuration, and only there: each configuration is what it claims."""
    module, tc, sources = check
    (metallib,) = [c for c in tc.configs if c.name == "metallib"]
    define = metallib.defines[0][len("-D") :]
    original, copy, line = broken_copy(
        sources,
        rf"#ifdef {define}\n",
        rf'#ifdef {define}\nstatic_assert(false, "compiled with {define}");\n',
        tmp_path,
    )
    for config in tc.configs:
        r = module.compile_source(tc, copy, config, quote_dir=original.parent)
        if config is metallib:
            assert r.returncode != 0 and f"{copy}:{line + 1}:" in r.stderr, r.stderr
            assert f"compiled with {define}" in r.stderr, r.stderr
        else:
            assert r.returncode == 0, f"[{config.name}]\n{r.stderr}"
