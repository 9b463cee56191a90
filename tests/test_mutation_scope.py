"""Which tests the mutation tool (tools/mutation/scope.py, worker.py) runs
on a mutated source: a test that loads a kernel through a name it imports
from another test module runs on that kernel's mutants, and the conformance
pass of each .metal file reaching the source runs after the emulator's
tests."""

import importlib.util
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "mutation"


def _tool_module(name):
    # worker.py imports scope.py by its bare name, as run.py runs them.
    sys.path.insert(0, str(TOOL))
    try:
        spec = importlib.util.spec_from_file_location(f"mutation_{name}", TOOL / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(TOOL))


scope = _tool_module("scope")
worker = _tool_module("worker")
SEEN_BY = scope.seen_by()


def _seen(test):
    return SEEN_BY[f"tests/metal_emu/{test}"]


def test_a_test_sees_the_kernel_it_loads_by_an_imported_name():
    # test_split_keys_kernel.py and test_metal_variants.py load
    # test_attention_kernel.py's METAL; test_na_product_groups.py runs
    # test_na_kernel.py's run_case.
    for test in ("test_split_keys_kernel.py", "test_metal_variants.py"):
        assert {"mlx_fused_attn/families/attention/attention.metal", "mlx_fused_attn/kernels/split_keys.h"} <= _seen(test), test
    assert "mlx_fused_attn/families/neighborhood/na_attention.h" in _seen("test_na_product_groups.py")


def test_an_import_is_followed_one_module_only():
    # test_mlx_plants.py imports MLX's kernels' helpers from
    # test_mlx_kernels.py, which imports our kernel from test_attention_kernel.py.
    assert "mlx_fused_attn/families/attention/attention.metal" in _seen("test_mlx_kernels.py")
    assert "mlx_fused_attn/families/attention/attention.metal" not in _seen("test_mlx_plants.py")


def test_a_test_sees_what_it_names_itself():
    assert "mlx_fused_attn/families/neighborhood/neighborhood.metal" in _seen("test_na_kernel.py")
    assert "mlx_fused_attn/families/neighborhood/neighborhood.metal" not in _seen("test_attention_kernel.py")


def test_the_conformance_pass_runs_on_the_files_reaching_the_source_after_the_emulator(tmp_path):
    w = worker.Worker(tmp_path, 0, SEEN_BY)
    conformance = [t for t in w.test_files("mlx_fused_attn/families/attention/attention.metal") if t.startswith(scope.CONFORMANCE)]
    assert conformance == [f"{scope.CONFORMANCE}[mlx_fused_attn/families/attention/attention.metal]"]
    reaching = [t for t in w.test_files("mlx_fused_attn/tile/language.h") if t.startswith(scope.CONFORMANCE)]
    assert reaching == [f"{scope.CONFORMANCE}[{m}]" for m in scope.entry_points()]
    assert "test_metal_conformance.py" in worker.FULL_ONLY


def test_the_conformance_node_ids_are_collected():
    ids = [t for t in SEEN_BY if t.startswith(scope.CONFORMANCE)]
    assert len(ids) == len(scope.entry_points())
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *ids],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:]
    assert f"{len(ids)} tests collected" in r.stdout, r.stdout[-2000:]
