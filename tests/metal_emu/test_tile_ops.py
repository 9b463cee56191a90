"""The tile-op library (mlx_fused_attn/tile) on Metal fragments, op by op.

Each test runs a kernel of tests/metal_emu/kernels/tile_ops.metal in the
Metal emulator over several tile shapes and compares every element with a
plain host loop (numpy). Outputs are poisoned with NaN first.
"""

import ctypes

import numpy as np
import pytest

from . import emu

METAL = "tests/metal_emu/kernels/tile_ops.metal"
FRAG = 8  # SimdgroupFrag is 8 x 8
SHAPES = [(1, 1), (2, 3), (4, 2)]


class TileDims(ctypes.Structure):
    _fields_ = [
        ("ld", ctypes.c_int),
        ("lim_rows", ctypes.c_int),
        ("lim_cols", ctypes.c_int),
        ("row0", ctypes.c_int),
        ("col0", ctypes.c_int),
        ("fill", ctypes.c_float),
    ]


@pytest.fixture(scope="module")
def prog():
    return emu.load(METAL)


def nan(shape, dtype=np.float32):
    return np.full(shape, np.nan, dtype)


@pytest.mark.parametrize("R,C", SHAPES)
@pytest.mark.parametrize("src_type", ["float", "half"])
@pytest.mark.parametrize("lim_rows,lim_cols", [(1000, 1000), (5, 11), (0, 3)])
def test_load_device_safe(prog, R, C, src_type, lim_rows, lim_cols):
    rows, cols = R * FRAG, C * FRAG
    ld = cols + 5
    rng = np.random.default_rng(R * 10 + C)
    lim_r, lim_c = min(lim_rows, rows), min(lim_cols, cols)
    # Only the elements inside the limits exist: the buffer ends there.
    n = max(0, (lim_r - 1) * ld + lim_c) if lim_r and lim_c else 0
    src = rng.standard_normal(max(n, 1)).astype(np.float16 if src_type == "half" else np.float32)
    src = src[:n] if n else src[:1]
    dims = TileDims(ld=ld, lim_rows=lim_rows, lim_cols=lim_cols, fill=-7.5)
    out = prog.launch(f"tile_load_safe_{src_type}_{R}x{C}", {0: src, 1: nan(rows * cols), 2: dims})
    got = out[1].reshape(rows, cols)
    want = np.full((rows, cols), -7.5, np.float32)
    for r in range(lim_r):
        for c in range(lim_c):
            want[r, c] = src[r * ld + c]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("R,C", SHAPES)
@pytest.mark.parametrize("dst_type", ["float", "bfloat"])
@pytest.mark.parametrize("lim_rows,lim_cols", [(1000, 1000), (6, 9)])
def test_store_device_safe(prog, R, C, dst_type, lim_rows, lim_cols):
    rows, cols = R * FRAG, C * FRAG
    ld = cols + 3
    rng = np.random.default_rng(R * 7 + C)
    src = rng.standard_normal(rows * cols).astype(np.float32)
    dims = TileDims(ld=ld, lim_rows=lim_rows, lim_cols=lim_cols)
    poison = emu.float_to_bfloat16_bits(nan(rows * ld)) if dst_type == "bfloat" else nan(rows * ld)
    out = prog.launch(f"tile_store_safe_{dst_type}_{R}x{C}", {0: src, 1: poison, 2: dims})
    got = out[1]
    if dst_type == "bfloat":
        got = emu.bfloat16_bits_to_float(got)
        src = emu.bfloat16_bits_to_float(emu.float_to_bfloat16_bits(src))
    got = got.reshape(rows, ld)
    want = nan((rows, ld))
    lim_r, lim_c = min(lim_rows, rows), min(lim_cols, cols)
    want[:lim_r, :lim_c] = src.reshape(rows, cols)[:lim_r, :lim_c]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("R,C", SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_load_shared(prog, R, C, transposed):
    rows, cols = R * FRAG, C * FRAG
    rng = np.random.default_rng(R + C)
    tile = rng.standard_normal((rows, cols)).astype(np.float32)
    staged = tile.T.copy() if transposed else tile
    name = f"tile_load_shared_{'t_' if transposed else ''}{R}x{C}"
    out = prog.launch(name, {0: staged.ravel(), 1: nan(rows * cols)})
    np.testing.assert_array_equal(out[1].reshape(rows, cols), tile)


@pytest.mark.parametrize("R,C", SHAPES)
def test_row_reduce_and_row_bin_op(prog, R, C):
    rows, cols = R * FRAG, C * FRAG
    rng = np.random.default_rng(R * 3 + C)
    src = rng.standard_normal((rows, cols)).astype(np.float32)
    max_in = rng.standard_normal(rows).astype(np.float32)
    max_in[::3] = 10.0  # the running value wins for some rows
    sum_in = rng.standard_normal(rows).astype(np.float32)
    scale = rng.standard_normal(rows).astype(np.float32)
    out = prog.launch(
        f"tile_row_ops_{R}x{C}",
        {
            0: src.ravel(),
            1: max_in,
            2: sum_in,
            3: scale,
            4: nan(rows),
            5: nan(rows),
            6: nan(rows * cols),
        },
    )
    np.testing.assert_array_equal(out[4], np.maximum(max_in, src.max(axis=1)))
    np.testing.assert_allclose(out[5], sum_in + src.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[6].reshape(rows, cols), src * scale[:, None] + np.float32(1))


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (2, 3, 4), (3, 1, 2)])
def test_matmad(prog, M, N, K):
    """tile_matmad, tile_matmad_shared (B transposed in threadgroup memory)
    and tile_to_operand, against a float64 product."""
    rng = np.random.default_rng(M * 100 + N * 10 + K)
    a = rng.standard_normal((M * FRAG, K * FRAG)).astype(np.float32)
    b = rng.standard_normal((K * FRAG, N * FRAG)).astype(np.float32)
    c = rng.standard_normal((M * FRAG, N * FRAG)).astype(np.float32)
    size = M * FRAG * N * FRAG
    out = prog.launch(
        f"tile_matmad_{M}x{N}x{K}",
        {0: a.ravel(), 1: b.ravel(), 2: c.ravel(), 3: nan(size), 4: nan(size), 5: nan(size)},
    )
    want = a.astype(np.float64) @ b + c
    for i in (3, 4, 5):
        np.testing.assert_allclose(out[i].reshape(want.shape), want, rtol=1e-5, atol=1e-5, err_msg=f"output {i}")


@pytest.mark.parametrize("R,C", SHAPES)
@pytest.mark.parametrize("row0,col0", [(0, 0), (17, 40)])
def test_map_coords(prog, R, C, row0, col0):
    rows, cols = R * FRAG, C * FRAG
    src = np.arange(rows * cols, dtype=np.float32) * 0.5
    dims = TileDims(row0=row0, col0=col0)
    out = prog.launch(f"tile_map_coords_{R}x{C}", {0: src, 1: nan(rows * cols), 2: dims})
    r = np.arange(rows)[:, None] + row0
    c = np.arange(cols)[None, :] + col0
    want = src.reshape(rows, cols) + (1000.0 * r + c).astype(np.float32)
    np.testing.assert_array_equal(out[1].reshape(rows, cols), want)


@pytest.mark.parametrize(
    "name,dtype,rows,cols,threads,safe",
    [
        ("block_loader_half_32x80_128", np.float16, 32, 80, 128, False),
        ("block_loader_half_32x80_128_safe", np.float16, 32, 80, 128, True),
        ("block_loader_float_16x128_128_safe", np.float32, 16, 128, 128, True),
        ("block_loader_float_16x32_64", np.float32, 16, 32, 64, False),
    ],
)
def test_block_loader(prog, name, dtype, rows, cols, threads, safe):
    """Every element of the block arrives; with load_safe, rows past the
    limit are zero and nothing past them is read (the source ends there).
    The safe cases also run under the race check (ThreadSanitizer)."""
    ld = cols + 24
    valid = rows - 5 if safe else rows
    rng = np.random.default_rng(rows + cols)
    src = rng.standard_normal((valid - 1) * ld + cols).astype(dtype)
    dims = TileDims(ld=ld, lim_rows=valid)
    out = prog.launch(
        name, {0: src, 1: nan(rows * cols, dtype), 2: dims}, threadgroup=(threads, 1, 1), race_check=safe
    )
    want = np.zeros((rows, cols), dtype)
    for r in range(valid):
        want[r] = src[r * ld : r * ld + cols]
    np.testing.assert_array_equal(out[1].reshape(rows, cols), want)


@pytest.mark.parametrize("M,N,D", [(1, 1, 1), (2, 4, 3)])
@pytest.mark.parametrize("n_blocks", [1, 3])
@pytest.mark.parametrize("init", ["empty", "sink"])
@pytest.mark.parametrize("score_scale", [1.0, 0.375])
def test_online_softmax(prog, M, N, D, n_blocks, init, score_scale):
    """Block-by-block softmax(s * score_scale) v equals the one-shot float64
    result; a starting (max, sum) = (m0, 1) acts as one extra logit m0 (a
    sink) with a zero value row. Scores include a block of -inf, a row of
    large values, and a third block below the first in every row (no row max
    moves there: the output is not rescaled)."""
    rows, bcols, dcols = M * FRAG, N * FRAG, D * FRAG
    rng = np.random.default_rng(M + N + D + n_blocks)
    s = rng.standard_normal((rows, n_blocks * bcols)).astype(np.float32) * 4
    s[0, :bcols] = -np.inf  # a row's first block is all -inf
    s[1] += 200.0  # exp2 of these would overflow without the max shift
    if n_blocks == 3:
        s[:, 2 * bcols :] = s[:, :bcols] - 1.0
    v = rng.standard_normal((n_blocks * bcols, dcols)).astype(np.float32)
    m0, s0 = (1.5, 1.0) if init == "sink" else (-np.finfo(np.float32).max, 0.0)
    out = prog.launch(
        f"online_softmax_{M}x{N}x{D}",
        {
            0: s.ravel(),
            1: v.ravel(),
            2: nan(rows * dcols),
            3: np.array([n_blocks], np.int32),
            4: np.array([m0, s0], np.float32),
            5: np.array([score_scale], np.float32),
        },
    )
    logits = s.astype(np.float64) * score_scale
    if init == "sink":
        logits = np.concatenate([np.full((rows, 1), m0), logits], axis=1)
        v = np.concatenate([np.zeros((1, dcols), np.float32), v])
    with np.errstate(invalid="ignore"):  # a row of only -inf is NaN
        w = np.exp2(logits - logits.max(axis=1, keepdims=True))
        want = (w / w.sum(axis=1, keepdims=True)) @ v
    np.testing.assert_allclose(out[2].reshape(rows, dcols), want, rtol=2e-5, atol=2e-5)
