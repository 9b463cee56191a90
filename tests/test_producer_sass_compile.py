"""The producer kernel's softmax runs under its own P V (attention_step.h's
overlapped step): ptxas schedules a wgmma.wait_group early in its basic
block, ahead of independent work, so P V's wait sits in the arms of the
rescale's branch, after the softmax. This compiles the producer kernels
(sm_90a) and reads their SASS: in the key loop, the block's exponentials
must lie between the wait for S (at most one group pending:
`WARPGROUP.DEPBAR.LE gsb0, 0x1`) and the wait for P V (none pending:
`0x0`), on the static grid and the persistent one, of the large-grid tiles
(two math warpgroups taking turns) and of the small-grid tiles (one, no
turns: choose_small_grid_tiles, opt-in). Skips without nvcc or nvdisasm (the
`test-cuda` extra installs NVIDIA's nvdisasm wheel)."""

import importlib.util
import os
import re
import shutil
import subprocess

import pytest

from test_cuda_compile import NVCC, nvcc_output

# (head dim, tiles before the persistent flag, keys a block): the large-grid
# tiles and the small-grid ones, each on the static grid and the persistent
# one (plan/persistent_grid.h).
TILES = [
    (d, f"fa::AttnTilesOf<{shape}, {persistent}>", bk)
    for d, shape, bk in [
        (128, "128, 128, 8, 3, 1, true, true, true", 128),
        (128, "64, 64, 4, 3, 2, true, true, true", 64),
        (64, "64, 128, 4, 3, 2, true, true, true", 128),
    ]
    for persistent in ("false", "true")
]
# (causal, mask): the three instances the AOT build makes of each dtype and
# tiles.
INSTANCES = [(d, t, bk, c, m) for d, t, bk in TILES for c, m in [("false", "false"), ("true", "false"), ("false", "true")]]
KERNELS = (
    '#include "mlx_fused_attn/families/attention/attention_kernel.cuh"\n'
    "const void* kernels[] = {\n"
    + "".join(
        f"    (const void*)fa::attention_producer_kernel<fa::bfloat_t, {d}, {d}, {t}, {c}, {m}>,\n"
        for d, t, bk, c, m in INSTANCES
    )
    + "};\n"
)


def scores_per_thread(bk):
    """A thread's scores of one block: 64 query rows by bk keys over a
    warpgroup."""
    return 64 * bk // 128


def find_nvdisasm():
    candidates = [shutil.which("nvdisasm")]
    if NVCC is not None:
        candidates.append(os.path.join(os.path.dirname(NVCC), "nvdisasm"))
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates.append(os.path.join(root, "cu13", "bin", "nvdisasm"))
    return next((c for c in candidates if c and os.path.exists(c)), None)


def exponentials_under_product(sass):
    """The most MUFU.EX2 between a `DEPBAR.LE gsb0, 0x1` and the next
    `DEPBAR.LE gsb0, 0x0` of one function's SASS, in address order."""
    best, count = 0, None
    for line in sass.splitlines():
        if re.search(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x1\b", line):
            count = 0
        elif re.search(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x0\b", line):
            if count is not None:
                best = max(best, count)
            count = None
        elif count is not None and "MUFU.EX2" in line:
            count += 1
    return best


def test_softmax_runs_under_its_product(tmp_path):
    nvdisasm = find_nvdisasm()
    if nvdisasm is None:
        pytest.skip("nvdisasm not found")
    cubin = nvcc_output(tmp_path, KERNELS, "cubin", "sm_90a")
    sass = subprocess.run([nvdisasm, str(cubin)], check=True, capture_output=True, text=True).stdout
    functions = re.split(r"\n//-+ \.text\.", sass)[1:]
    assert len(functions) == len(INSTANCES)
    for body in functions:
        name = body.splitlines()[0].strip()
        # The mangled tiles' second argument: Li<bk>E after AttnTilesOfILi<bq>E.
        bk = int(re.search(r"AttnTilesOfILi\d+ELi(\d+)E", name).group(1))
        assert exponentials_under_product(body) >= scores_per_thread(bk), name
