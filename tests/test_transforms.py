"""Gradients, forward-mode derivatives, mx.compile and mx.vmap through the ops."""

import io

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import assert_close, device_params, rand, reference


def loss_fn(attn, mask=None, sinks=None):
    def loss(q, k, v, *extra):
        m = extra[0] if extra else mask
        out = attn(q, k, v, scale=0.2, mask=m, sinks=sinks)
        return (out * out).sum()

    return loss


def fused(q, k, v, **kw):
    return fa.scaled_dot_product_attention(q, k, v, **kw)


def fast(q, k, v, **kw):
    return mx.fast.scaled_dot_product_attention(q, k, v, **kw)


@device_params()
@pytest.mark.parametrize("mask", [None, "causal", "bool"])
@pytest.mark.parametrize("sinks", [False, True])
def test_grad_qkv(device, mask, sinks):
    with mx.stream(device):
        q = rand((2, 4, 33, 32), mx.float32, 1)
        k = rand((2, 2, 40, 32), mx.float32, 2)
        v = rand((2, 2, 40, 32), mx.float32, 3)
        m = mx.random.uniform(shape=(33, 40), key=mx.random.key(4)) > 0.3 if mask == "bool" else mask
        s = rand((4,), mx.float32, 5) if sinks else None
        got = mx.grad(loss_fn(fused, m, s), argnums=(0, 1, 2))(q, k, v)
        want = mx.grad(loss_fn(fast, m, s), argnums=(0, 1, 2))(q, k, v)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.array(g), np.array(w), rtol=2e-4, atol=2e-5)


@device_params()
def test_grad_additive_mask(device):
    with mx.stream(device):
        q = rand((1, 2, 20, 32), mx.float32, 1)
        k = rand((1, 2, 30, 32), mx.float32, 2)
        v = rand((1, 2, 30, 32), mx.float32, 3)
        m = rand((1, 1, 20, 30), mx.float32, 4)
        got = mx.grad(loss_fn(fused), argnums=(0, 3))(q, k, v, m)
        want = mx.grad(loss_fn(fast), argnums=(0, 3))(q, k, v, m)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(np.array(g), np.array(w), rtol=2e-4, atol=2e-5)


@device_params()
def test_grad_matches_finite_differences(device):
    with mx.stream(device):
        q = rand((1, 1, 5, 8), mx.float32, 1)
        k = rand((1, 1, 6, 8), mx.float32, 2)
        v = rand((1, 1, 6, 8), mx.float32, 3)
        loss = loss_fn(fused, "causal")
        g = np.array(mx.grad(loss)(q, k, v))
        qn = np.array(q).astype(np.float64)
        eps = 1e-3
        for idx in [(0, 0, 0, 0), (0, 0, 3, 5), (0, 0, 4, 7)]:
            up, dn = qn.copy(), qn.copy()
            up[idx] += eps
            dn[idx] -= eps
            fd = (loss(mx.array(up.astype(np.float32)), k, v) - loss(mx.array(dn.astype(np.float32)), k, v)) / (2 * eps)
            assert abs(float(fd) - g[idx]) < 2e-2 * max(1.0, abs(g[idx]))


@device_params()
def test_jvp(device):
    with mx.stream(device):
        q, k, v = (rand((1, 2, 17, 32), mx.float32, s) for s in range(3))
        t = rand((1, 2, 17, 32), mx.float32, 9)
        f = lambda q: fused(q, k, v, scale=0.3, mask="causal")  # noqa: E731
        g = lambda q: fast(q, k, v, scale=0.3, mask="causal")  # noqa: E731
        _, got = mx.jvp(f, [q], [t])
        _, want = mx.jvp(g, [q], [t])
        np.testing.assert_allclose(np.array(got[0]), np.array(want[0]), rtol=1e-4, atol=1e-5)


@device_params()
def test_compile(device):
    with mx.stream(device):
        q, k, v = (rand((2, 4, 65, 64), mx.float16, s) for s in range(3))
        f = mx.compile(lambda q, k, v: fused(q, k, v, scale=0.125, mask="causal") * 2.0)
        out = f(q, k, v)
        out2 = f(q, k, v)
        assert_close(out / 2.0, q, k, v, 0.125, "causal")
        np.testing.assert_array_equal(np.array(out), np.array(out2))


@device_params()
def test_compile_shapeless(device):
    """A shapeless compile runs the primitive on shapes it was not planned
    for: each evaluation runs a plan for the shapes it gets."""
    with mx.stream(device):
        f = mx.compile(
            lambda q, k, v: fused(q, k, v, scale=0.125, mask="causal"), shapeless=True
        )
        for L in (16, 40):
            q, k, v = (rand((2, 4, L, 64), mx.float16, s) for s in range(3))
            assert_close(f(q, k, v), q, k, v, 0.125, "causal")


@device_params()
@pytest.mark.parametrize("in_axes", [(0, 0, 0), (1, None, None), (0, 0, 0, None)])
def test_vmap(device, in_axes):
    with mx.stream(device):
        n = 3
        q = rand((n, 2, 4, 33, 32), mx.float32, 1)
        k = rand((n, 2, 2, 40, 32), mx.float32, 2)
        v = rand((n, 2, 2, 40, 32), mx.float32, 3)
        if in_axes[0] == 1:
            q = q.swapaxes(0, 1)
        if in_axes[1] is None:
            k, v = k[0], v[0]
        sinks = rand((4,), mx.float32, 4) if len(in_axes) == 4 else None

        def f(q, k, v, *s):
            return fused(q, k, v, scale=0.2, mask="causal", sinks=s[0] if s else None)

        args = (q, k, v) + ((sinks,) if sinks is not None else ())
        out = mx.vmap(f, in_axes=in_axes)(*args)
        for i in range(n):
            qi = q[:, i] if in_axes[0] == 1 else q[i]
            ki, vi = (k, v) if in_axes[1] is None else (k[i], v[i])
            want = reference(qi, ki, vi, 0.2, "causal", sinks)
            np.testing.assert_allclose(np.array(out[i]), want, rtol=1e-4, atol=1e-5)


@device_params()
def test_vmap_over_sinks(device):
    with mx.stream(device):
        q, k, v = (rand((1, 2, 9, 16), mx.float32, s) for s in range(3))
        sinks = rand((3, 2), mx.float32, 7)
        out = mx.vmap(lambda s: fused(q, k, v, scale=0.5, sinks=s))(sinks)
        for i in range(3):
            np.testing.assert_allclose(
                np.array(out[i]), reference(q, k, v, 0.5, None, sinks[i]), rtol=1e-4, atol=1e-5
            )


def graph(out):
    """out's unevaluated graph in DOT: one node a primitive, by name."""
    dot = io.StringIO()
    mx.export_to_dot(dot, out)
    return dot.getvalue()


@device_params()
@pytest.mark.parametrize(
    "spatial, kernel, dilation, in_axes",
    [
        ((33,), 5, 2, (0, 0, 0)),
        ((7, 9), 3, 2, (2, None, 0)),
        ((4, 5, 6), 3, 1, (None, 1, None)),
    ],
)
def test_neighborhood_vmap_stays_fused(device, spatial, kernel, dilation, in_axes):
    n, B, H, D = 3, 2, 2, 32
    shape = (B, *spatial, H, D)
    # Each input carries the mapped axis (of n) at its in_axes position.
    q, k, v = (
        rand(shape, mx.float32, seed) if axis is None else mx.moveaxis(rand((n, *shape), mx.float32, seed), 0, axis)
        for seed, axis in enumerate(in_axes)
    )

    def na(q, k, v):
        return fa.neighborhood_attention(q, k, v, kernel, dilation=dilation, stream=device)

    out = mx.vmap(na, in_axes=in_axes)(q, k, v)
    dot = graph(out)
    assert '"NeighborhoodAttention"' in dot and '"Softmax"' not in dot, dot
    for i in range(n):
        qi, ki, vi = (x if axis is None else mx.take(x, i, axis) for x, axis in zip((q, k, v), in_axes))
        np.testing.assert_allclose(np.array(out[i]), np.array(na(qi, ki, vi)), rtol=1e-5, atol=1e-6)


@device_params()
def test_neighborhood_compile_shapeless(device):
    """The windows are checked against the op's spatial shape: a shapeless
    compile on the same shape runs fused, and one that changes it is refused
    with a reason, not run with stale windows."""
    f = mx.compile(
        lambda q, k, v: fa.neighborhood_attention(q, k, v, (3, 3), stream=device), shapeless=True
    )
    q, k, v = (rand((1, 6, 6, 2, 32), mx.float32, s) for s in range(3))
    want = fa.neighborhood_attention(q, k, v, (3, 3), stream=device)
    np.testing.assert_allclose(np.array(f(q, k, v)), np.array(want), rtol=1e-5, atol=1e-6)
    q, k, v = (rand((1, 8, 8, 2, 32), mx.float32, s) for s in range(3))
    with pytest.raises(ValueError, match="spatial shape differs"):
        mx.eval(f(q, k, v))
