"""The package takes what mx.fast.scaled_dot_product_attention (MLX 0.32.4)
takes: each input mx.fast accepts gives the same result here, each input it
rejects raises the same exception class here. The remaining differences
(README, "Differences from mx.fast") are pinned at the end."""

import math

import mlx.core as mx
import numpy as np
import pytest
from conftest import device_params, rand

import mlx_fused_attn as fa

B, HQ, HKV, LQ, LK, D = 2, 4, 2, 8, 11, 16
# Error allowed between two correct attention results, relative to the
# output's magnitude: a few units in the last place of the output dtype.
TOL = {mx.float16: 4e-3, mx.bfloat16: 3e-2, mx.float32: 2e-5, mx.float64: 1e-12}


def qkv(dtype=mx.float32, seed=0, dv=D):
    return (
        rand((B, HQ, LQ, D), dtype, seed),
        rand((B, HKV, LK, D), dtype, seed + 1),
        rand((B, HKV, LK, dv), dtype, seed + 2),
    )


def on_cpu(make):
    with mx.stream(mx.cpu):
        return make()


def both(q, k, v, **kw):
    kw.setdefault("scale", D**-0.5)
    return (
        fa.scaled_dot_product_attention(q, k, v, **kw),
        mx.fast.scaled_dot_product_attention(q, k, v, **kw),
    )


def assert_same(ours, fast):
    assert ours.dtype == fast.dtype and ours.shape == fast.shape
    a = np.array(ours.astype(mx.float32) if ours.dtype == mx.bfloat16 else ours, np.float64)
    b = np.array(fast.astype(mx.float32) if fast.dtype == mx.bfloat16 else fast, np.float64)
    scale = max(1.0, float(np.abs(b).max(initial=0.0)))
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL[fast.dtype] * scale)


def int_mask(dtype):
    rng = np.random.default_rng(7)
    return mx.array(rng.integers(-4, 3, (LQ, LK))).astype(dtype)


ACCEPTED = {
    "scale numpy float32": lambda: (qkv(), dict(scale=np.float32(0.25))),
    "scale numpy float64": lambda: (qkv(), dict(scale=np.float64(0.25))),
    "scale numpy int64": lambda: (qkv(), dict(scale=np.int64(1))),
    "scale python int": lambda: (qkv(), dict(scale=1)),
    "scale bool": lambda: (qkv(), dict(scale=True)),
    "scale 0-d array": lambda: (qkv(), dict(scale=mx.array(0.25))),
    "scale (1,) array": lambda: (qkv(), dict(scale=mx.array([0.25]))),
    "scale float16 array": lambda: (qkv(), dict(scale=mx.array(0.25, mx.float16))),
    "int32 mask (additive)": lambda: (qkv(), dict(mask=int_mask(mx.int32))),
    "uint8 mask (additive)": lambda: (qkv(), dict(mask=int_mask(mx.uint8))),
    "int64 mask, float16 q": lambda: (qkv(mx.float16), dict(mask=int_mask(mx.int64))),
    "int8 mask, bfloat16 q": lambda: (qkv(mx.bfloat16), dict(mask=int_mask(mx.int8))),
    "int mask broadcast [LK]": lambda: (qkv(), dict(mask=int_mask(mx.int32)[0])),
    "float16 mask, float32 q": lambda: (qkv(), dict(mask=int_mask(mx.float16))),
    "bool mask": lambda: (qkv(), dict(mask=int_mask(mx.int32) > -2)),
    "causal": lambda: (qkv(), dict(mask="causal")),
    "int32 sinks": lambda: (qkv(), dict(sinks=mx.array([1, -2, 0, 3], mx.int32))),
    "bool sinks": lambda: (qkv(), dict(sinks=mx.array([True, False, True, False]))),
    "int sinks, float16 q": lambda: (qkv(mx.float16), dict(sinks=mx.array([1, 2, 3, 4]))),
    "int q, float16 k v": lambda: ((mx.ones((B, HQ, LQ, D), mx.int32),) + qkv(mx.float16)[1:], {}),
    "float16 k, float32 q v": lambda: ((qkv()[0], qkv(mx.float16)[1], qkv()[2]), {}),
    "D_v != D": lambda: (qkv(dv=24), {}),
    "float64 (CPU: no GPU has it)": lambda: on_cpu(lambda: (qkv(mx.float64), dict(mask="causal", stream=mx.cpu))),
    "stream as Stream": lambda: (qkv(), dict(stream=mx.default_stream(mx.cpu))),
    # On the CPU: NumPy views of MLX's empty CUDA arrays crash (MLX 0.32.4).
    "empty L_q": lambda: on_cpu(lambda: ((mx.zeros((B, HQ, 0, D)),) + qkv()[1:], dict(stream=mx.cpu))),
}


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_accepted_inputs_give_mx_fast_results(name):
    (q, k, v), kw = ACCEPTED[name]()
    ours, fast = both(q, k, v, **kw)
    assert_same(ours, fast)


@device_params()
@pytest.mark.parametrize("dtype", [mx.float16, mx.float32])
def test_integer_masks_and_sinks_on_every_device(device, dtype):
    q, k, v = qkv(dtype)
    kw = dict(mask=int_mask(mx.int32), sinks=mx.array([1, 0, -1, 2]), stream=device)
    assert_same(*both(q, k, v, **kw))


q0, k0, v0 = qkv()
h16 = qkv(mx.float16)

REJECTED = {
    "integer q, k, v": (
        dict(q=q0.astype(mx.int32), k=k0.astype(mx.int32), v=v0.astype(mx.int32)),
        ValueError,
    ),
    "complex v": (dict(v=v0.astype(mx.complex64)), ValueError),
    "float64 mask, float32 q": (dict(mask=mx.zeros((LQ, LK), mx.float64, stream=mx.cpu)), ValueError),
    "float32 mask, float16 q": (
        dict(q=h16[0], k=h16[1], v=h16[2], mask=mx.zeros((LQ, LK))),
        ValueError,
    ),
    "complex mask": (dict(mask=mx.zeros((LQ, LK), mx.complex64)), ValueError),
    "float64 sinks": (dict(sinks=mx.zeros((HQ,), mx.float64, stream=mx.cpu)), ValueError),
    "float32 sinks, float16 q": (
        dict(q=h16[0], k=h16[1], v=h16[2], sinks=mx.zeros((HQ,))),
        ValueError,
    ),
    "sinks shape": (dict(sinks=mx.zeros((HQ + 1,))), ValueError),
    "sinks a list": (dict(sinks=[0.0] * HQ), TypeError),
    "mask a list": (dict(mask=[[True]]), TypeError),
    "mask string": (dict(mask="upper"), ValueError),
    "mask shape": (dict(mask=mx.zeros((3, LK), mx.bool_)), ValueError),
    "mask rank 5": (dict(mask=mx.zeros((1, 1, 1, LQ, LK))), ValueError),
    "q a list": (dict(q=[[1.0]]), TypeError),
    "q rank 3": (dict(q=mx.zeros((HQ, LQ, D))), ValueError),
    "head dim": (dict(k=mx.zeros((B, HKV, LK, D + 1))), ValueError),
    "heads not a multiple": (dict(q=mx.zeros((B, 3, LQ, D))), ValueError),
    "batch": (dict(k=mx.zeros((B + 1, HKV, LK, D)), v=mx.zeros((B + 1, HKV, LK, D))), ValueError),
    "v length": (dict(v=mx.zeros((B, HKV, LK + 1, D))), ValueError),
    "scale a string": (dict(scale="0.25"), TypeError),
    "scale None": (dict(scale=None), TypeError),
    "scale (2,) array": (dict(scale=mx.array([0.25, 0.5])), TypeError),
}


@pytest.mark.parametrize("name", list(REJECTED))
def test_rejected_inputs_raise_the_mx_fast_class(name):
    kw, error = REJECTED[name]
    q, k, v = kw.pop("q", q0), kw.pop("k", k0), kw.pop("v", v0)
    kw.setdefault("scale", 0.25)
    with pytest.raises(error):
        mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, **kw))
    with pytest.raises(error):
        mx.eval(fa.scaled_dot_product_attention(q, k, v, **kw))
    with pytest.raises(error):
        fa.can_use_fused(q, k, v, **kw)


# The differences that remain, as listed in the README.


@pytest.mark.parametrize("scale", [math.nan, math.inf])
def test_difference_non_finite_scale(scale):
    """mx.fast computes with a NaN or infinite scale; this package raises
    ValueError (such a scale is a bug upstream, and the kernels fold the
    scale into exp2)."""
    mx.eval(mx.fast.scaled_dot_product_attention(q0, k0, v0, scale=scale))
    with pytest.raises(ValueError, match="scale must be finite"):
        fa.scaled_dot_product_attention(q0, k0, v0, scale=scale)


def test_difference_force_fused_on_the_cpu():
    """mx.fast has no fused CPU kernel, so force_fused=True raises there;
    this package's CPU kernel runs the call."""
    kw = dict(scale=0.25, force_fused=True, stream=mx.cpu)
    with pytest.raises(ValueError, match="no fused kernel"):
        mx.fast.scaled_dot_product_attention(q0, k0, v0, **kw)
    out = fa.scaled_dot_product_attention(q0, k0, v0, **kw)
    assert_same(out, mx.fast.scaled_dot_product_attention(q0, k0, v0, scale=0.25, stream=mx.cpu))
