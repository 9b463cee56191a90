"""The generated instantiation lists (the CUDA AOT tables in
mlx_fused_attn/families/*/aot/ and the instance blocks of the families'
.metal files)
are what tools/gen_instances.py writes from the tile choosers now: a chooser
or head dim list changed without rerunning it fails here, naming the stale
files.

Skips without a C++ compiler (the script compiles the choosers)."""

import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))
import gen_instances  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")), reason="no C++ compiler"
)


def test_instance_lists_are_current():
    r = subprocess.run([sys.executable, gen_instances.__file__, "--check"], capture_output=True, text=True)
    assert r.returncode == 0, f"run `python tools/gen_instances.py`:\n{r.stdout}{r.stderr}"


def test_a_changed_list_is_stale():
    """A Metal block or an AOT table that differs from what the choosers
    give is reported, and so is a table of a group that no longer exists."""
    files = gen_instances.wanted_files()
    metal = os.path.join(REPO, "mlx_fused_attn", "families", "neighborhood", "neighborhood.metal")
    table = gen_instances.aot_path("short_attention", "short_attention_d64")
    files[metal] = files[metal].replace("FA_NA_INSTANTIATE(float32, float, 128,", "FA_NA_INSTANTIATE(float32, float, 96,")
    del files[table]
    assert gen_instances.stale_paths(files) == ([metal], [table])
