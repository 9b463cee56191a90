"""Array masks classified by block: the visit lists and shown bits the GPU
kernels read (mlx_fused_attn/op/mask_block_lists.cpp, kernels/mask_visits.h) against
the numpy mirror the emulator tests use, its cache, mlx-lm's causal and
sliding-window masks, two-valued masks, and the op on every device with
masks made of whole blocks."""

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import assert_close, device_params, rand
from metal_emu.cases import SHOWN, TWO_VALUED, TWO_VALUED_SCALED, VALUES, visit_rows
from metal_emu.cases import backward_list_rows as reference_list_rows
from metal_emu.cases import backward_mask_lists as reference_backward_lists
from metal_emu.cases import mask_visits as reference_visits

_ext = fa._ext


def visits(mask, dtype, L_q, L_k, bq, bk):
    return np.array(_ext._mask_visits(mask, dtype, L_q, L_k, bq, bk, stream=mx.cpu))


def split(got, L_q, L_k, bq, bk):
    """(visit rows [B_m, H_m, n_qb, visit], shown bits [B_m, H_m, n_qb * bq,
    words]) of a slice-wise array."""
    n_qb = -(-L_q // bq)
    visit, words = visit_rows(L_k, bk)
    rows = got[..., : n_qb * visit].reshape(got.shape[:2] + (n_qb, visit))
    bits = got[..., n_qb * visit :].reshape(got.shape[:2] + (n_qb * bq, words))
    return rows, bits


def listed(row):
    """(key block, class) of each entry of a visit row."""
    return [(int(e) >> 2, int(e) & 3) for e in row[3 : 3 + row[0]]]


def as_kernel_reads(mask, dtype):
    """The mask's values as the kernel reads them: bool, or cast to dtype."""
    if mask.dtype == mx.bool_:
        return np.array(mask), "bool"
    return np.array(mask.astype(dtype).astype(mx.float32)).astype(np.float64), "additive"


def check_visits(mask, dtype, L_q, L_k, bq, bk):
    got = visits(mask, dtype, L_q, L_k, bq, bk)
    values, kind = as_kernel_reads(mask, dtype)
    want = reference_visits(values, kind, L_q, L_k, bq, bk)
    assert got.shape == want.shape
    (got_rows, got_bits), (want_rows, want_bits) = (split(x, L_q, L_k, bq, bk) for x in (got, want))
    # Entries past a row's count are not read; compare the listed ones.
    for idx in np.ndindex(*got_rows.shape[:3]):
        n = want_rows[idx][0]
        np.testing.assert_array_equal(got_rows[idx][: n + 3], want_rows[idx][: n + 3], err_msg=str(idx))
    np.testing.assert_array_equal(got_bits, want_bits)
    return got_rows


def block_mask(L_q, L_k, bq, bk, seed, heads=1):
    """A bool mask whose blocks are shown, hidden or mixed, with no row
    that sees no key."""
    rng = np.random.default_rng(seed)
    m = rng.random((heads, L_q, L_k)) < 0.5
    for h in range(heads):
        for qb in range(-(-L_q // bq)):
            for kb in range(-(-L_k // bk)):
                cls = (h + qb + 2 * kb + seed) % 3
                if cls < 2:
                    m[h, qb * bq : (qb + 1) * bq, kb * bk : (kb + 1) * bk] = cls == 0
    m[..., 0] = True
    return m


@pytest.mark.parametrize(
    "L_q,L_k,bq,bk", [(64, 64, 32, 32), (70, 100, 32, 16), (1, 33, 64, 32), (129, 65, 64, 64)]
)
@pytest.mark.parametrize("heads", [1, 3])
def test_bool_visits_match_the_reference(L_q, L_k, bq, bk, heads):
    m = mx.array(block_mask(L_q, L_k, bq, bk, seed=L_q + heads, heads=heads))
    check_visits(m, mx.float16, L_q, L_k, bq, bk)


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16, mx.float32])
def test_additive_visits_match_the_reference(dtype):
    """Zeros are shown; -inf and values whose log2(e) multiple overflows
    (fp32 finfo.min, -1e38 cast to fp16: -inf) are hidden; NaN and 0.5 are
    other values."""
    L_q, L_k = 70, 90
    m = np.where(block_mask(L_q, L_k, 32, 16, seed=3, heads=2), 0.0, -np.inf).astype(np.float32)
    m[0, 32:64, 16:32] = np.finfo(np.float32).min
    m[1, 0:32, 32:48] = -1e38
    m[1, 32:64, 48:64] = np.nan
    m[0, 64:, 64:80] = 0.5
    got = check_visits(mx.array(m), dtype, L_q, L_k, 32, 16)
    assert [c for kb, c in listed(got[0, 1, 1]) if kb == 3] == [VALUES]  # NaN's block is read


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
@pytest.mark.parametrize("off", [-1e4, -np.inf, float(np.finfo(np.float32).min)])
def test_two_valued_blocks(dtype, off):
    """The benchmark's masks: 0 or one other value. Mixed blocks are read as
    bits, with the off value at (off_row, off_col) of the query block."""
    L_q, L_k, bq, bk = 100, 200, 32, 64
    keep = np.random.default_rng(5).random((2, L_q, L_k)) > 0.25
    keep[:, np.arange(L_q), np.arange(L_q)] = True
    keep[1, :, 64:128] = False  # a hidden block column
    m = np.where(keep, 0.0, off).astype(np.float32)
    m[0, 40:50, 130] = -3.0  # another value in one block
    rows = check_visits(mx.array(m), dtype, L_q, L_k, bq, bk)
    hidden_off = off < -1e30
    for h, qb in np.ndindex(2, rows.shape[2]):
        row = rows[0, h, qb]
        want = [
            (kb, VALUES if (h, qb, kb) == (0, 1, 2) else TWO_VALUED)
            for kb in range(-(-L_k // bk))
            if not (h == 1 and kb == 1 and hidden_off)
        ]
        assert listed(row) == want, (h, qb)
        r, c = row[1], row[2]
        assert qb * bq <= r < (qb + 1) * bq and m[h, r, c] == off, (h, qb, r, c)


def test_row_and_key_broadcast_masks():
    """A key-padding mask [B, 1, 1, L_k]: one visit row per batch entry."""
    pad = np.ones((2, 1, 1, 100), bool)
    pad[1, ..., 64:] = False
    got = check_visits(mx.array(pad), mx.float16, 40, 100, 32, 32)
    assert got.shape == (2, 1, 2, 7)
    assert listed(got[1, 0, 0]) == [(0, SHOWN), (1, SHOWN)]  # blocks 2 and 3 hidden


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_fully_masked_row_keeps_every_block(kind):
    """A row that sees no key keeps every block of its query block, the
    hidden one included: bool masks as bits, scaled before the select (the
    masked score is the off value), additive ones as values."""
    m = np.ones((64, 96), bool)
    m[:, 32:64] = False
    m[5] = False
    mask = mx.array(m) if kind == "bool" else mx.where(mx.array(m), 0.0, -mx.inf)
    got, _ = split(visits(mask, mx.float32, 64, 96, 32, 32), 64, 96, 32, 32)
    kept = TWO_VALUED_SCALED if kind == "bool" else VALUES
    assert listed(got[0, 0, 0]) == [(0, kept), (1, kept), (2, kept)]
    assert listed(got[0, 0, 1]) == [(0, SHOWN), (2, SHOWN)]


def test_int_masks_are_additive():
    m = mx.zeros((33, 40), mx.int32)
    got, _ = split(visits(m, mx.float16, 33, 40, 32, 32), 33, 40, 32, 32)
    assert listed(got[0, 0, 0]) == [(0, SHOWN), (1, SHOWN)]


def test_fresh_masks_never_hit_a_stale_entry():
    """Masks made and dropped in turn (their ids could be reused if the cache
    did not keep them) each get their own list."""
    for i in range(12):
        m = mx.array(block_mask(64, 64, 32, 32, seed=i))
        check_visits(m, mx.float16, 64, 64, 32, 32)
        del m


def test_the_classes_carry_no_derivative():
    """A gradient through an additive mask stops at its classes: the ops that
    build them (a gather by computed indices) have no derivative."""
    m = mx.random.normal((1, 1, 65, 100), key=mx.random.key(3))

    def f(m):
        blocks = _ext._mask_visits(m, mx.float32, 65, 100, 64, 64, stream=mx.cpu)
        return blocks.astype(mx.float32).sum() + m.sum()

    np.testing.assert_array_equal(np.array(mx.grad(f)(m)), np.ones(m.shape, np.float32))


def test_the_same_mask_gets_the_same_list():
    m = mx.array(block_mask(64, 64, 32, 32, seed=1))
    a = visits(m, mx.float16, 64, 64, 32, 32)
    b = visits(m, mx.float16, 64, 64, 32, 32)
    np.testing.assert_array_equal(a, b)
    # Other tiles are another entry.
    assert visits(m, mx.float16, 64, 64, 64, 64).shape == (1, 1, 4 + 64 * 2)


@pytest.mark.parametrize("window", [None, 40])
def test_mlx_lm_masks_skip_blocks(window):
    """mlx-lm's causal and sliding-window masks as arrays: a query block
    visits the blocks on or under its diagonal (within its window) only."""
    base = pytest.importorskip("mlx_lm.models.base")
    L, bq, bk = 256, 32, 32
    m = base.create_causal_mask(L, 0, window_size=window)
    got = check_visits(m, mx.float16, L, L, bq, bk)
    for qb in range(L // bq):
        first = 0 if window is None else max(0, (qb * bq - window + 1) // bk)
        entries = listed(got[0, 0, qb])
        assert [kb for kb, _ in entries] == list(range(first, qb + 1)), qb
        # Blocks under the diagonal are shown (but at the window's edge);
        # the diagonal's bits are read.
        assert dict(entries)[qb] == TWO_VALUED
        inner = [c for kb, c in entries if kb < qb and (window is None or kb * bk > qb * bq - window + bq)]
        assert inner == [SHOWN] * len(inner), qb
        assert {c for _, c in entries} <= {SHOWN, TWO_VALUED}


def backward_lists(mask, dtype, L_q, L_k, tiles):
    return np.array(_ext._backward_mask_lists(mask, dtype, L_q, L_k, *tiles, stream=mx.cpu))


def backward_rows(lists, kind, L_q, L_k, tiles):
    """Per slice, the listed entries ((block, class), ...) of each dK/dV row
    then each dQ row (entries past a row's count are not read), then a
    bool mask's shown bits of the two kernels."""
    dkdv_keys, dkdv_queries, dq_queries, dq_keys = tiles
    _, dkdv_words, _, _, dq_words, total = reference_list_rows(kind, L_q, L_k, *tiles)
    kernels = [
        (-(-L_k // dkdv_keys), 1 + -(-L_q // dkdv_queries), -(-L_k // dkdv_keys) * dkdv_keys * dkdv_words),
        (-(-L_q // dq_queries), 1 + -(-L_k // dq_keys), -(-L_q // dq_queries) * dq_queries * dq_words),
    ]
    out = {}
    for idx in np.ndindex(*lists.shape[:2]):
        at, rows, bits = 0, [], []
        for n, length, n_bits in kernels:
            for r in range(n):
                row = lists[idx][at + r * length : at + (r + 1) * length]
                rows.append([(int(e) >> 2, int(e) & 3) for e in row[1 : 1 + row[0]]])
            at += n * length
            bits.append(lists[idx][at : at + n_bits].tolist())
            at += n_bits
        assert at == lists.shape[2] == total
        out[idx] = rows + bits
    return out


# dK/dV keys, dK/dV queries, dQ queries, dQ keys: CUDA's wgmma tiles at D = 64,
# Metal's, and ragged ones.
BWD_TILES = [(64, 128, 64, 128), (32, 64, 32, 64), (16, 32, 48, 16)]


@pytest.mark.parametrize("tiles", BWD_TILES)
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_backward_lists_match_the_reference(tiles, kind):
    """Hidden blocks left out unless a row of them sees no key, shown blocks
    classed shown, in both kernels' orientations; rows that see no key in
    the mask's first batch entry, a mask per head in the second."""
    L_q, L_k = 150, 200
    m = np.stack([block_mask(L_q, L_k, 16, 16, seed=s, heads=2) for s in range(2)])
    m[0, :, 5] = False
    if kind == "bool":
        mask, values = mx.array(m), m
    else:
        values = np.where(m, 0.0, -np.inf)
        values[1, 1, :, 7] = -3.0
        mask = mx.array(values.astype(np.float16))
    got = backward_lists(mask, mx.float16, L_q, L_k, tiles)
    want = reference_backward_lists(values, kind, L_q, L_k, *tiles)
    assert got.shape == want.shape
    assert backward_rows(got, kind, L_q, L_k, tiles) == backward_rows(want, kind, L_q, L_k, tiles)


def test_backward_lists_of_a_sliding_window():
    """mlx-lm's sliding-window mask as a bool array: each key block lists the
    query blocks within the window's reach, each query block the key blocks;
    the blocks inside the window are shown."""
    L, w, b = 512, 128, 64
    i, j = np.arange(L)[:, None], np.arange(L)[None]
    m = (j <= i) & (j > i - w)
    rows = backward_rows(backward_lists(mx.array(m), mx.float16, L, L, (b, b, b, b)), "bool", L, L, (b, b, b, b))[(0, 0)]
    n = L // b
    for kb in range(n):
        assert [qb for qb, _ in rows[kb]] == [qb for qb in range(n) if kb <= qb <= kb + w // b], kb
    for qb in range(n):
        assert [kb for kb, _ in rows[n + qb]] == [kb for kb in range(n) if qb - w // b <= kb <= qb], qb
        inner = [c for kb, c in rows[n + qb] if qb - w // b < kb < qb]
        assert inner == [SHOWN] * min(qb, w // b - 1), qb
        # The window's edges read the shown bits.
        assert {c for _, c in rows[n + qb]} - {SHOWN} == {TWO_VALUED}, qb


# ---------------------------------------------------------------------------
# The op with block-structured masks (the GPU kernels skip by the list)


@device_params()
@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("heads", [1, 4])
def test_block_masks(device, kind, heads):
    B, H, L_q, L_k, D = 2, 4, 300, 400, 64
    q, k, v = (rand(s, mx.float16, i) for i, s in enumerate([(B, H, L_q, D), (B, H, L_k, D), (B, H, L_k, D)]))
    # Blocks of 128 are whole blocks of every kernel's tiles.
    m = mx.array(block_mask(L_q, L_k, 128, 128, seed=heads, heads=heads)[None])
    if kind == "additive":
        m = mx.where(m, 0.0, -float("inf")).astype(mx.float16)
    out = fa.scaled_dot_product_attention(q, k, v, scale=D**-0.5, mask=m, stream=device)
    assert_close(out, q, k, v, D**-0.5, mask=m, what=f"{kind} heads={heads}")


@device_params()
@pytest.mark.parametrize("kind,off", [("bool", None), ("additive", -1e4), ("additive", -float("inf"))])
@pytest.mark.parametrize("heads", [1, 4])
@pytest.mark.parametrize("L_q,L_k", [(300, 400), (16, 3000)])
def test_two_valued_masks(device, kind, off, heads, L_q, L_k):
    """The benchmark's masks (each query's diagonal shown, a quarter of the
    rest masked): every block two-valued, read as bits; the short, long call
    splits its keys on a GPU, the splits sharing the visits."""
    B, H, D = 1, 4, 64
    q, k, v = (rand(s, mx.float16, i) for i, s in enumerate([(B, H, L_q, D), (B, H, L_k, D), (B, H, L_k, D)]))
    keep = np.random.default_rng(heads).random((1, heads, L_q, L_k)) > 0.25
    keep[..., np.arange(L_q), np.arange(L_q) + L_k - L_q] = True
    m = mx.array(keep) if kind == "bool" else mx.array(np.where(keep, 0.0, off).astype(np.float16))
    out = fa.scaled_dot_product_attention(q, k, v, scale=D**-0.5, mask=m, stream=device)
    assert_close(out, q, k, v, D**-0.5, mask=m, what=f"{kind} {off} heads={heads}")


@device_params()
@pytest.mark.parametrize("window", [None, 100])
def test_mlx_lm_masks(device, window):
    base = pytest.importorskip("mlx_lm.models.base")
    L, D = 333, 128
    q, k, v = (rand((1, 4, L, D), mx.bfloat16, i) for i in range(3))
    m = base.create_causal_mask(L, 0, window_size=window)
    out = fa.scaled_dot_product_attention(q, k, v, scale=D**-0.5, mask=m, stream=device)
    assert_close(out, q, k, v, D**-0.5, mask=m, what=f"window={window}")


@device_params()
def test_one_mask_for_every_layer(device):
    """The same mask array over several calls, as mlx-lm passes it to each
    layer, and a new mask after it."""
    L, D = 130, 64
    q, k, v = (rand((1, 2, L, D), mx.float16, i) for i in range(3))
    for seed in (1, 2):
        m = mx.array(block_mask(L, L, 32, 32, seed=seed))
        for _ in range(3):
            out = fa.scaled_dot_product_attention(q, k, v, scale=0.125, mask=m, stream=device)
            assert_close(out, q, k, v, 0.125, mask=m, what=f"seed={seed}")


@device_params()
def test_fully_masked_rows_with_hidden_blocks(device):
    L, D = 96, 32
    q, k, v = (rand((1, 2, L, D), mx.float32, i) for i in range(3))
    rows = np.ones((L, L), bool)
    rows[:, 32:64] = False
    rows[[3, 70]] = False
    m = mx.array(rows)
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.3, mask=m, stream=device)
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask=m, stream=mx.cpu)
    np.testing.assert_allclose(np.array(out), np.array(want), rtol=1e-5, atol=1e-6)


@device_params()
@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_left_padded_prefill_mask(device, dtype):
    """mlx-lm's batched prefill (BatchKVCache): causal, each entry's left
    padding hidden, so a padded query's row sees no key (the mean of V) and
    its query block reads every key block's bits."""
    B, H, L, D = 3, 4, 300, 64
    q, k, v = (rand((B, H, L, D), dtype, i) for i in range(3))
    pad = mx.array([0, 37, 150])
    i, j = mx.arange(L)[:, None], mx.arange(L)[None]
    mask = (j <= i) & (j >= pad[:, None, None, None])
    out = fa.scaled_dot_product_attention(q, k, v, scale=D**-0.5, mask=mask, stream=device)
    assert_close(out, q, k, v, D**-0.5, mask=mask, what=f"{dtype} left padding")


@device_params()
def test_keys_a_bool_mask_hides_from_every_row_are_never_read(device):
    """Key blocks that a bool mask hides from every row are skipped: NaN in
    their K and V changes nothing (read and weighted 0, it would make NaN).
    A key-padding mask [B, 1, 1, L_k] hiding an entry's first 128 keys."""
    B, H, L, D = 2, 2, 256, 32
    q, k, v = (rand((B, H, L, D), mx.float32, i) for i in range(3))
    mask = mx.arange(L) >= mx.array([0, 128])[:, None, None, None]
    padding = (mx.arange(B) == 1)[:, None, None, None] & (mx.arange(L) < 128)[None, None, :, None]
    k_nan, v_nan = (mx.where(padding, mx.nan, x) for x in (k, v))
    out = fa.scaled_dot_product_attention(q, k_nan, v_nan, scale=D**-0.5, mask=mask, stream=device)
    assert_close(out, q, k, v, D**-0.5, mask=mask, what="hidden keys skipped")


@device_params()
def test_gradient_through_an_additive_block_mask(device):
    L, D = 64, 32
    q, k, v = (rand((1, 1, L, D), mx.float32, i) for i in range(3))
    m = mx.array(np.where(block_mask(L, L, 32, 32, seed=4), 0.0, -1e9).astype(np.float32))

    def fused(mask):
        return fa.scaled_dot_product_attention(q, k, v, scale=0.2, mask=mask, stream=device).sum()

    def plain(mask):
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=0.2, mask=mask).sum()

    got, want = mx.grad(fused)(m), mx.grad(plain)(m)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-4, atol=1e-5)
