"""The GitHub workflows pass actionlint (syntax, expressions, runner labels,
action inputs, and their shell scripts through shellcheck where it is
installed): a broken workflow otherwise shows only once it runs on GitHub,
and the self-hosted job runs rarely. The Xcode pin of the hosted macOS job
is read with PyYAML (which the `test` extra brings through mlx-lm).

actionlint comes from the `lint` extra (`pip install ".[lint]"`, which
needs GitHub reachable to fetch its binary); without it these tests skip."""

import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

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


def test_hosted_macos_job_pins_its_xcode():
    """The hosted job selects the Xcode it names before the Metal toolchain
    is looked for, and prints which Xcode and Metal compiler it ran: a
    runner image update must not swap the compiler silently."""
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "macos.yml").read_text())
    version = workflow["env"]["XCODE_VERSION"]
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", version), version
    job = workflow["jobs"]["metal-compile"]
    assert not job["runs-on"].startswith("self-hosted")
    steps = job["steps"]
    runs = [step.get("run", "") for step in steps]
    select = next(i for i, run in enumerate(runs) if "xcode-select -s" in run)
    assert 'sudo xcode-select -s "/Applications/Xcode_${XCODE_VERSION}.app"' in runs[select]
    assert "xcodebuild -version" in runs[select]
    toolchain = next(i for i, step in enumerate(steps) if step.get("uses") == "./.github/actions/metal-toolchain")
    first_metal = next(i for i, run in enumerate(runs) if "metal " in run or "pip wheel" in run)
    assert select < toolchain < first_metal, (select, toolchain, first_metal)
    assert "xcrun -sdk macosx metal --version" in runs[first_metal], runs[first_metal]
