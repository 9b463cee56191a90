"""What is mutated and which tests can see each mutated file.

The mutated sources are the Metal entry points (each kernel family's
mlx_fused_attn/families/<folder>/<family>.metal) and every
header they reach by #include. A test file sees a source when a .metal file
it loads in the emulator (a quoted path in it) or a header its host programs
include (an #include line in it) reaches that source, or when a test module
it imports from names one (test_split_keys_kernel.py loads the METAL of
test_attention_kernel.py); test_strict_check.py checks every .metal file.
Beside the emulator's tests, the conformance pass over each entry point (one
test of tests/test_metal_conformance.py a .metal file) sees what that file
includes: it checks the rules of Apple's compiler that the emulator's g++
does not apply (kernel argument indices, address spaces, types). Includes
are resolved as cmake/flatten_source.py resolves them for the JIT source.
"""

import importlib.util
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
EMU_TESTS = "tests/metal_emu"
# Each kernel family's folder (mlx_fused_attn/families/registry.h).
FAMILIES = "mlx_fused_attn/families"

_spec = importlib.util.spec_from_file_location("flatten_source", REPO / "cmake" / "flatten_source.py")
flatten_source = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flatten_source)

_METAL_PATH = re.compile(r"[\"']((?:mlx_fused_attn/families/\w+|tests/metal_emu/kernels)/\w+\.metal)[\"']")
_HEADER = re.compile(r'#include\s*[\\]*"(mlx_fused_attn/[\w/]+\.h)[\\]*"')
# `from .test_x import ...`: the test runs what test_x's names load.
_TEST_IMPORT = re.compile(r"^from \.(test_\w+) import", re.M)
# One entry point's conformance pass: the test, parametrized by the path.
CONFORMANCE = "tests/test_metal_conformance.py::test_source_conforms"
# Tests over every .metal file of the repository (found by glob, not named).
_EVERY_METAL = {"test_strict_check.py"}


def include_closure(path, root=REPO):
    """`path` (repository-relative) and every file it reaches by a quoted
    #include, repository-relative."""
    seen = []
    todo = [(root / path).resolve()]
    while todo:
        f = todo.pop()
        rel = f.relative_to(root).as_posix()
        if rel in seen:
            continue
        seen.append(rel)
        for line in f.read_text().splitlines():
            m = flatten_source._INCLUDE.match(line)
            if m:
                todo.append(flatten_source._resolve(m.group(1), f.parent, [root]))
    return seen


def entry_points(root=REPO):
    return sorted(p.relative_to(root).as_posix() for p in root.glob(f"{FAMILIES}/*/*.metal"))


def mutated_sources(root=REPO):
    """The entry points and the headers they include, sorted."""
    files = set()
    for metal in entry_points(root):
        files.update(include_closure(metal, root))
    return sorted(files)


def seen_by(root=REPO):
    """{test file (repository-relative) or one test's node id: set of
    sources it can see}."""
    tests = sorted((root / EMU_TESTS).glob("test_*.py"))
    texts = {t.stem: t.read_text() for t in tests}
    named = {
        stem: set(_METAL_PATH.findall(text)) | set(_HEADER.findall(text)) for stem, text in texts.items()
    }
    out = {}
    for test in tests:
        # The imported modules' own names only: test_mlx_plants.py imports
        # test_mlx_kernels.py's MLX helpers, not the kernel it compares with.
        roots = set(named[test.stem])
        for imported in _TEST_IMPORT.findall(texts[test.stem]):
            roots |= named.get(imported, set())
        if test.name in _EVERY_METAL:
            roots |= set(entry_points(root))
        sources = set()
        for r in roots:
            if (root / r).is_file():
                sources.update(include_closure(r, root))
        out[test.relative_to(root).as_posix()] = sources
    for metal in entry_points(root):
        out[f"{CONFORMANCE}[{metal}]"] = set(include_closure(metal, root))
    return out


def metal_views(source, root=REPO):
    """The .metal files (entry points and the emulator's test kernels) whose
    translation unit holds `source`."""
    metals = entry_points(root) + sorted(
        p.relative_to(root).as_posix() for p in (root / EMU_TESTS / "kernels").glob("*.metal")
    )
    return [m for m in metals if source in include_closure(m, root)]
