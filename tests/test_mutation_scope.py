"""Which emulator tests the mutation tool (tools/mutation/scope.py) runs on
a mutated source: a test that loads a kernel through a name it imports from
another test module must run on that kernel's mutants."""

import importlib.util
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "mutation"


def _scope():
    sys.path.insert(0, str(TOOL))
    try:
        spec = importlib.util.spec_from_file_location("mutation_scope", TOOL / "scope.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(TOOL))


SEEN_BY = _scope().seen_by()


def _seen(test):
    return SEEN_BY[f"tests/metal_emu/{test}"]


def test_a_test_sees_the_kernel_it_loads_by_an_imported_name():
    # test_split_keys_kernel.py and test_metal_variants.py load
    # test_attention_kernel.py's METAL; test_na_product_groups.py runs
    # test_na_kernel.py's run_case.
    for test in ("test_split_keys_kernel.py", "test_metal_variants.py"):
        assert {"metal/attention.metal", "mlx_fused_attn/kernels/split_keys.h"} <= _seen(test), test
    assert "mlx_fused_attn/kernels/na_attention.h" in _seen("test_na_product_groups.py")


def test_an_import_is_followed_one_module_only():
    # test_mlx_plants.py imports MLX's kernels' helpers from
    # test_mlx_kernels.py, which imports our kernel from test_attention_kernel.py.
    assert "metal/attention.metal" in _seen("test_mlx_kernels.py")
    assert "metal/attention.metal" not in _seen("test_mlx_plants.py")


def test_a_test_sees_what_it_names_itself():
    assert "metal/neighborhood.metal" in _seen("test_na_kernel.py")
    assert "metal/neighborhood.metal" not in _seen("test_attention_kernel.py")
