"""The emulator's load counts (emu.Program.count_loads), and what they show
of the Metal attention kernel: each threadgroup reads Q once and the K and V
of every key block its mask's classes list once, reads no mask where the
classes say the block is shown or two-valued, and the whole tile where it
holds other values. Expected bytes come from the masks themselves, block by
block, not from the kernel's class lists."""

import numpy as np
import pytest

from . import cases, traffic
from .test_attention_kernel import kernel_for
from .test_emulator import kernels


def test_counts_every_byte_a_tiled_matmul_moves():
    m, n, k = 64, 96, 48
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    dims = np.array([m, n, k], np.int32)
    grid = (n // 32, m // 32, 1)
    out, loads = kernels("tiled_matmul").count_loads(
        "tiled_matmul", {0: a, 1: b, 2: np.full((m, n), np.nan, np.float32), 3: dims},
        constants={0: 0}, grid=grid, threadgroup=(128, 1, 1), schedule=3)
    np.testing.assert_allclose(out[2], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    # A threadgroup reads its 32 rows of A and 32 columns of B, every
    # element once; each output element is written once.
    assert loads[0] == traffic.emu.Loads(a.nbytes * grid[0], a.nbytes * grid[0], 0)
    assert loads[1] == traffic.emu.Loads(b.nbytes * grid[1], b.nbytes * grid[1], 0)
    assert loads[2] == traffic.emu.Loads(0, 0, m * n * 4)
    # Every thread reads the dimensions; each threadgroup's distinct bytes once.
    assert loads[3].distinct == dims.nbytes * grid[0] * grid[1]
    assert loads[3].read > loads[3].distinct


@pytest.fixture(scope="module")
def prog():
    return traffic.program()


def expected(kind, values, L_q, L_k, H_q, D, bq, bk, causal=False, item=2):
    """Bytes the kernel must read with these mask values [heads, L_q, L_k]
    (None: no mask): Q once; K and V of each key block not hidden from
    every row of the query block; the tile of each additive block holding
    values other than 0 and the query block's off value (its least value
    outside shown scores, in a listed block); that off value's element
    once per query block with a two-valued block. A query block with a row
    that sees no key lists every block (that row is the mean of all of V),
    its additive tiles whole."""
    read = {"q": H_q * L_q * D * item, "k": 0, "v": 0}
    if kind is not None:
        read["mask"] = 0
    for h in range(H_q):
        m = None if kind is None else values[h % values.shape[0]]
        for qb in range(-(-L_q // bq)):
            rows = slice(qb * bq, min(L_q, (qb + 1) * bq))
            dead = m is not None and (
                ~m[rows] if kind == "bool" else m[rows] == -np.inf).all(axis=-1).any()
            listed = []
            for kb in range(-(-L_k // bk)):
                cols = slice(kb * bk, min(L_k, (kb + 1) * bk))
                if causal and kb * bk > rows.stop - 1 + L_k - L_q:
                    continue
                tile = None if m is None else m[rows, cols]
                hidden = tile is not None and (~tile if kind == "bool" else tile == -np.inf).all()
                if dead or not hidden:
                    listed.append((cols, tile))
                    read["k"] += (cols.stop - cols.start) * D * item
            read["v"] = read["k"]
            if kind != "additive":
                continue
            off = min((t[t != 0].min() for _, t in listed if (t != 0).any()), default=0.0)
            values_tiles = [t for _, t in listed if dead or not np.isin(t, [0.0, off]).all()]
            read["mask"] += sum(t.size * item for t in values_tiles)
            if any(not (t == 0).all() for _, t in listed) and not values_tiles:
                read["mask"] += item
    return read


@pytest.mark.parametrize(
    "pattern", [None, "causal", "window 40", "padding", "random bool", "random add", "alibi"])
def test_attention_reads_what_the_mask_needs(prog, pattern):
    """Ragged query and key blocks, two heads sharing the mask."""
    _, bq, bk, _ = kernel_for(prog, "float16", 64, 64)
    L_q, L_k, H_q = 3 * bq + 5, 4 * bk + 3, 2
    mask = None if pattern is None else traffic.mask_pattern(pattern, L_q, L_k)
    got = traffic.fused_traffic(prog, H_q=H_q, L_q=L_q, L_k=L_k, mask=mask)
    kind, values = mask or (None, None)
    want = expected(kind, values, L_q, L_k, H_q, 64, bq, bk)
    assert {n: got.read[n] for n in want} == want
    assert got.written == H_q * L_q * 64 * 2
    if pattern is None:
        assert "classes" not in got.read
    else:
        # At most its query block's list and its rows' shown bits.
        visit, words = cases.visit_rows(L_k, bk)
        assert 0 < got.read["classes"] <= H_q * -(-L_q // bq) * (visit + bq * words) * 4


def test_causal_reads_the_blocks_on_and_below_the_diagonal(prog):
    """The causal flag visits what a causal mask given as an array does, and
    the same blocks as mx.fast's Metal kernel (whose count traffic.py
    derives from its loop)."""
    _, bq, bk, _ = kernel_for(prog, "float16", 64, 64)
    L_q, L_k = 2 * bq + 7, 3 * bk + 9
    flag = traffic.fused_traffic(prog, L_q=L_q, L_k=L_k, causal=True)
    array = traffic.fused_traffic(prog, L_q=L_q, L_k=L_k, mask=traffic.mask_pattern("causal", L_q, L_k))
    mx_fast = traffic.mx_fast_traffic(L_q=L_q, L_k=L_k, causal=True)
    assert flag.read == mx_fast.read
    assert {n: array.read[n] for n in ("q", "k", "v")} == flag.read
    assert flag.read == expected(None, None, L_q, L_k, 2, 64, bq, bk, causal=True)
