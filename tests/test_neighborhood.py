"""Neighborhood attention against a plain reference that builds the explicit
neighborhood mask (written here independently of the C++ geometry)."""

import itertools

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import DEVICES, FLOOR, device_params, rand, to_np


def axis_neighbors(n, k, d, causal):
    """allowed[i, j] for one axis, straight from the NATTEN definition."""
    allowed = np.zeros((n, n), bool)
    for i in range(n):
        g, j = i % d, i // d
        m = len(range(g, n, d))
        if causal:
            idx = range(max(0, j - k + 1), j + 1)
        else:
            start = min(max(j - k // 2, 0), m - k)
            idx = range(start, start + k)
        for t in idx:
            allowed[i, g + t * d] = True
    return allowed


def na_reference(q, k, v, kernel, dilation, causal, scale):
    qn, kn, vn = to_np(q), to_np(k), to_np(v)
    spatial = qn.shape[1:-2]
    allowed = np.ones((1, 1), bool)
    for n, ks, d, c in zip(spatial, kernel, dilation, causal):
        allowed = np.kron(allowed, axis_neighbors(n, ks, d, c))
    B, H = qn.shape[0], qn.shape[-2]
    L = int(np.prod(spatial))
    qf, kf, vf = (x.reshape(B, L, H, -1) for x in (qn, kn, vn))
    s = scale * np.einsum("blhd,bmhd->bhlm", qf, kf)
    s = np.where(allowed, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhlm,bmhd->blhd", p, vf)
    return out.reshape(qn.shape[:-1] + (vn.shape[-1],))


def check(out, q, k, v, kernel, dilation, causal, scale, what):
    ref = na_reference(q, k, v, kernel, dilation, causal, scale)
    got = to_np(out)
    assert got.shape == ref.shape, what
    err = np.abs(got - ref).max()
    # One rounding of the output plus fp32 accumulation: the dtype floor.
    assert err <= 2 * FLOOR[q.dtype], f"{what}: max error {err:.3g}"


CASES = [  # spatial, kernel, dilation, causal
    ((33,), (7,), (1,), (False,)),
    ((64,), (8,), (1,), (False,)),  # even kernel
    ((40,), (40,), (1,), (False,)),  # kernel = axis: full attention
    ((50,), (5,), (3,), (False,)),  # dilation groups of 17, 17, 16
    ((37,), (6,), (2,), (True,)),
    ((9, 12), (3, 5), (1, 2), (False, False)),
    ((10, 11), (4, 3), (2, 1), (True, False)),  # causal on one axis only
    ((8, 8), (8, 8), (1, 1), (False, False)),
    ((5, 6, 7), (3, 3, 3), (1, 1, 2), (False, True, False)),
    ((4, 6, 5), (2, 5, 5), (2, 1, 1), (False, False, True)),
]


@device_params()
@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16, mx.float32])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_matches_explicit_mask(device, dtype, case):
    spatial, kernel, dilation, causal = CASES[case]
    D = [32, 64, 128][case % 3]
    shape = (2,) + spatial + (3, D)
    q, k, v = (rand(shape, dtype, 10 * case + i) for i in range(3))
    out = fa.neighborhood_attention(
        q, k, v, kernel, dilation=dilation, is_causal=causal, stream=device
    )
    assert out.dtype == dtype
    check(out, q, k, v, kernel, dilation, causal, D**-0.5, f"case {CASES[case]} {dtype}")


# The CPU kernel tiles the fastest axis by 64 queries of one dilation group
# and picks its score tile by kernel size (<= 5, <= 7, wider); these cross
# tile boundaries, leave ragged last tiles, give dilation groups of unequal
# length and windows wider than one score tile, and use head dims that leave
# tails in the products.
TILE_CASES = [  # spatial, kernel, dilation, causal, head dim
    ((200,), (13,), (1,), (False,), 64),  # tiles of 64, 64, 64, 8
    ((200,), (13,), (3,), (False,), 32),  # groups of 67, 67, 66: two tiles each
    ((150,), (9,), (1,), (True,), 80),  # causal windows across tile edges
    ((130,), (130,), (1,), (False,), 16),  # kernel = axis, wider than a tile
    ((3, 140), (3, 33), (1, 2), (False, True), 24),
    ((4, 5, 70), (3, 5, 5), (1, 1, 1), (True, False, False), 40),
    ((6, 67), (5, 7), (1, 1), (False, False), 96),
    ((66,), (6,), (1,), (False,), 13),  # odd head dim
]


@device_params()
@pytest.mark.parametrize("dtype", [mx.float16, mx.float32])
@pytest.mark.parametrize("case", range(len(TILE_CASES)))
def test_tiles_match_explicit_mask(device, dtype, case):
    spatial, kernel, dilation, causal, D = TILE_CASES[case]
    shape = (1,) + spatial + (2, D)
    q, k, v = (rand(shape, dtype, 100 + 10 * case + i) for i in range(3))
    out = fa.neighborhood_attention(
        q, k, v, kernel, dilation=dilation, is_causal=causal, stream=device
    )
    check(out, q, k, v, kernel, dilation, causal, D**-0.5, f"tile case {TILE_CASES[case]} {dtype}")


@device_params()
def test_scalar_arguments_apply_to_every_axis(device):
    q, k, v = (rand((1, 9, 10, 2, 32), mx.float32, i) for i in range(3))
    out = fa.neighborhood_attention(q, k, v, 3, dilation=2, is_causal=True, scale=0.3, stream=device)
    check(out, q, k, v, (3, 3), (2, 2), (True, True), 0.3, "scalar args")


@device_params()
def test_strided_inputs(device):
    base = rand((2, 3, 40, 64), mx.float16, 1)  # [B, H, L, D] viewed heads-last
    q = base.transpose(0, 2, 1, 3)
    k = rand((2, 40, 3, 128), mx.float16, 2)[..., ::2]
    v = rand((2, 40, 3, 64), mx.float16, 3)
    out = fa.neighborhood_attention(q, k, v, 9, stream=device)
    check(out, q, k, v, (9,), (1,), (False,), 0.125, "strided")


def test_can_use_fused_and_gradients():
    q, k, v = (rand((1, 12, 2, 16), mx.float32, i) for i in range(3))
    ok, reason = fa.neighborhood_can_use_fused(q, k, v, 5, stream=mx.cpu)
    assert ok and reason == ""

    def loss(q, k, v):
        return (fa.neighborhood_attention(q, k, v, 5, dilation=2) ** 2).sum()

    grads = mx.grad(loss, argnums=(0, 1, 2))(q, k, v)
    # The same gradient through the explicit-mask formulation in plain ops.
    allowed = mx.array(axis_neighbors(12, 5, 2, False))

    def dense(q, k, v):
        t = lambda x: x.transpose(0, 2, 1, 3)  # noqa: E731
        out = mx.fast.scaled_dot_product_attention(t(q), t(k), t(v), scale=0.25, mask=allowed)
        return (out**2).sum()

    want = mx.grad(dense, argnums=(0, 1, 2))(q, k, v)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(len(DEVICES) == 1, reason="no GPU")
def test_gpu_reason_is_given():
    q = rand((1, 12, 2, 16), mx.float32, 1)
    ok, reason = fa.neighborhood_can_use_fused(q, q, q, 3, stream=mx.gpu)
    assert ok or reason


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        (((1, 8, 2, 16), 3), {}, None, None),
        (((8, 2, 16), 3), {}, ValueError, "rank 4 to 6"),
        (((1, 8, 2, 16), 9), {}, ValueError, r"kernel_size on axis 0 must be in \[1, 8\]"),
        (((1, 8, 2, 16), 3), dict(dilation=3), ValueError, r"must be in \[1, 2\]"),
        (((1, 8, 2, 16), 3), dict(dilation=0), ValueError, "dilation must be >= 1"),
        (((1, 8, 8, 2, 16), (3, 3, 3)), {}, ValueError, "one per spatial axis"),
        (((1, 8, 2, 16), 0), {}, ValueError, "kernel_size on axis 0"),
        (((1, 8, 2, 16), 2.5), {}, TypeError, "kernel_size must be a int"),
        (((1, 8, 2, 16), 3), dict(is_causal=1), TypeError, "is_causal must be a bool"),
        (((1, 8, 2, 16), 3), dict(scale="x"), TypeError, "scale must be None or a float"),
    ],
)
def test_bad_input(args, kwargs, error, match):
    shape, ks = args
    q = mx.zeros(shape)
    if error is None:
        fa.neighborhood_attention(q, q, q, ks, **kwargs)
        return
    with pytest.raises(error, match=match):
        fa.neighborhood_attention(q, q, q, ks, **kwargs)


def test_mismatched_shapes_and_dtypes():
    q = mx.zeros((1, 8, 2, 16))
    with pytest.raises(ValueError, match="k must match q"):
        fa.neighborhood_attention(q, mx.zeros((1, 9, 2, 16)), q, 3)
    with pytest.raises(ValueError, match="head dim"):
        fa.neighborhood_attention(q, mx.zeros((1, 8, 2, 8)), q, 3)
    with pytest.raises(TypeError, match="floating-point"):
        fa.neighborhood_attention(q.astype(mx.int32), q, q, 3)
