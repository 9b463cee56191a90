"""The README works as printed: every command it shows names the extras it
needs where it is shown, its test command is the one CI runs, and its
Python examples run (but the one that downloads a model)."""

import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
# ```lang ... ``` blocks, with the prose between the block before and this one.
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```\n", re.S | re.M)
INSTALL = re.compile(r'pip install [^\n]*?"?\.\[([\w,-]+)\]"?')

# What each kind of command needs, as extras of pyproject.toml.
NEEDS = [
    (re.compile(r"python -m pytest\b"), "test"),
    (re.compile(r"python benchmarks/\w+\.py"), "bench"),
    (re.compile(r"^\s*(from|import) mlx_lm\b", re.M), "lm"),
]


def blocks():
    """(language, code, the prose of its section: from the heading above it
    to the next heading, code left out)."""
    found = list(BLOCK.finditer(README))
    prose = README
    for m in found:  # blank the code, whose comments look like headings
        prose = prose[:m.start()] + " " * (m.end() - m.start()) + prose[m.end():]
    headings = [h.start() for h in re.finditer(r"^#+ ", prose, re.M)] + [len(prose)]
    out = []
    for m in found:
        start = max(h for h in headings if h <= m.start()) if headings[0] <= m.start() else 0
        end = min(h for h in headings if h > m.start())
        out.append((m.group(1), m.group(2), prose[start:end]))
    return out


def extras():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"]


def provided(extra, table):
    """The extras `extra` brings in, itself included (mlx_fused_attn[x] entries)."""
    out = {extra}
    for req in table[extra]:
        m = re.match(r"mlx_fused_attn\[([\w,-]+)\]", req)
        if m:
            for e in m.group(1).split(","):
                out |= provided(e, table)
    return out


def test_every_command_names_the_extras_it_needs():
    table = extras()
    checked = 0
    for lang, code, prose in blocks():
        installed = set()
        for m in INSTALL.finditer(code):
            for e in m.group(1).split(","):
                assert e in table, f"README installs an extra pyproject.toml lacks: {e}"
                installed |= provided(e, table)
        # A block that installs nothing relies on the prose around it.
        named = set()
        for e in re.findall(r"`([\w-]+)` extra", prose) + re.findall(r'"\.\[([\w,-]+)\]"', prose):
            for x in e.split(","):
                if x in table:
                    named |= provided(x, table)
        for pattern, extra in NEEDS:
            if pattern.search(code):
                checked += 1
                assert extra in installed | named, (
                    f"a README {lang} block needs the {extra!r} extra but neither installs "
                    f"nor names it:\n{code}")
    assert checked >= 5, "the README's commands were not found"


def test_extras_hold_what_their_commands_import():
    table = extras()

    def names(extra):
        reqs = [r for e in provided(extra, table) for r in table[e]]
        return {re.split(r"[<>=!\[; ]", r, maxsplit=1)[0].lower() for r in reqs}

    assert {"pytest", "pytest-xdist", "numpy", "hypothesis", "mlx-lm"} <= names("test")
    assert {"numpy", "matplotlib"} <= names("bench")
    assert "mlx-lm" in names("lm")


def test_the_readme_test_command_is_what_ci_runs():
    ci = (REPO / ".ci" / "run").read_text()
    command = "python -m pytest -q -n auto tests"
    assert command in ci and command in README


def python_examples():
    return [code for lang, code, _ in blocks() if lang == "python"]


def test_the_readme_has_its_examples():
    codes = python_examples()
    assert len(codes) >= 4
    # The one that downloads says so, in the code and before it.
    downloads = [c for c in codes if "load(" in c]
    assert len(downloads) == 1 and "downloads" in downloads[0]


@pytest.mark.parametrize(
    "code",
    [c for c in python_examples() if "load(" not in c],
    ids=lambda c: c.strip().splitlines()[-1][:40],
)
def test_python_example_runs(code, tmp_path):
    if re.search(r"^\s*(from|import) mlx_lm\b", code, re.M):
        pytest.importorskip("mlx_lm")
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
