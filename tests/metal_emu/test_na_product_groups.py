"""The neighborhood kernel with warps whose products run in groups of four
(KVBlock::kProductWarps, as Hopper's warpgroup products), in the Metal
emulator: the instances of tests/metal_emu/kernels/na_stages.metal named
``_pg4``, against test_na_kernel.py's float64 explicit-mask reference.

A group visits every key block that any of its warps needs, so a warp also
steps through blocks outside its own windows (whole rows of -inf scores) or
with no query at all; the results must not move, and every warp must still
meet every barrier.
"""

import math

import pytest

from . import emu
from .test_na_kernel import probe, run_case  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def stages_prog():
    return emu.load("tests/metal_emu/kernels/na_stages.metal")


@pytest.mark.parametrize(
    "spatial,kernel,dilation,causal,dtype,D,suffix,schedule,run",
    [
        # 1-D, a tile a threadgroup: a resident box and a ring.
        ((300,), (63,), None, None, "float16", 64, "_st6_pg4", 3, None),
        ((300,), (191,), None, None, "float16", 64, "_st6_pg4", "fair", None),
        # 1-D runs of tiles; causal windows, dilation.
        ((700,), (7,), None, None, "float16", 64, "_st6_pg4", 11, (5, 6)),
        ((600,), (20,), (3,), (True,), "float16", 64, "_st6_pg4", "fair", (2, 6)),
        # 2-D and 3-D: a group's warps lie along different axes, some past
        # the end of the group.
        ((19, 40), (5, 13), (1, 2), (True, False), "float16", 64, "_st3_pg4", 5, None),
        ((7, 9, 12), (3, 5, 5), (2, 1, 1), None, "float32", 32, "_st2_pg4", 6, None),
    ],
)
def test_product_groups(stages_prog, probe, spatial, kernel, dilation, causal, dtype, D,  # noqa: F811
                        suffix, schedule, run):
    # run_case checks every output element against the reference.
    grid = run_case(stages_prog, probe, spatial, kernel, dilation, causal, dtype=dtype, D=D,
                    suffix=suffix, schedule=schedule, run=run, seed=len(spatial))
    # The case exercises what it is for: whole groups of four warps, more
    # than one warp a group.
    warps = math.prod(grid.warps)
    assert warps >= 4 and warps % 4 == 0, f"{list(grid.warps)} warps do not form product groups"
