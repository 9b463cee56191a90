"""The GitHub workflows pass actionlint (syntax, expressions, runner labels,
action inputs, and their shell scripts through shellcheck where it is
installed): a broken workflow otherwise shows only once it runs on GitHub,
and the self-hosted job runs rarely.

actionlint comes from the `lint` extra (`pip install ".[lint]"`, which
needs GitHub reachable to fetch its binary); without it these tests skip."""

import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


def actionlint(*args, cwd=REPO):
    exe = shutil.which("actionlint") or shutil.which(
        "actionlint", path=str(pathlib.Path(sys.executable).parent)
    )
    if exe is None:
        pytest.skip('actionlint is not installed (pip install ".[lint]")')
    try:
        return subprocess.run([exe, *map(str, args)], cwd=cwd, capture_output=True, text=True)
    except OSError as e:
        pytest.skip(f"actionlint cannot run here: {e}")


def test_workflows_pass_actionlint():
    assert WORKFLOWS, "no workflow files"
    r = actionlint(*WORKFLOWS)
    assert r.returncode == 0, r.stdout + r.stderr


def test_actionlint_rejects_a_broken_workflow(tmp_path):
    """What the check above relies on: actionlint fails on a mistake."""
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    broken = workflows / "broken.yml"
    broken.write_text(
        "on: push\n"
        "jobs:\n"
        "  test:\n"
        "    runs-on: ubuntu-latest\n"
        "    steps:\n"
        "      - run: echo ${{ github.no_such_context_property }}\n"
    )
    r = actionlint(broken, cwd=tmp_path)
    assert r.returncode != 0 and "no_such_context_property" in r.stdout, r.stdout + r.stderr
