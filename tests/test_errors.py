"""Bad arguments raise ValueError / TypeError naming the argument (the class
mx.fast raises for the same argument: tests/test_mx_fast_parity.py)."""

import mlx.core as mx
import pytest

import mlx_fused_attn as fa

q = mx.zeros((2, 4, 8, 32))
k = mx.zeros((2, 2, 10, 32))
v = mx.zeros((2, 2, 10, 32))


def call(q=q, k=k, v=v, **kw):
    kw.setdefault("scale", 1.0)
    return fa.scaled_dot_product_attention(q, k, v, **kw)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(q=mx.zeros((4, 8, 32))), ValueError, "q must have rank 4"),
        (dict(k=mx.zeros((2, 2, 10, 32, 1))), ValueError, "k must have rank 4"),
        (dict(v=mx.zeros((2, 2, 32))), ValueError, "v must have rank 4"),
        (dict(k=mx.zeros((2, 2, 10, 16))), ValueError, "head dim"),
        (dict(v=mx.zeros((2, 2, 11, 32))), ValueError, "v must have the heads and length of k"),
        (dict(k=mx.zeros((3, 2, 10, 32)), v=mx.zeros((3, 2, 10, 32))), ValueError, "batch"),
        (dict(k=mx.zeros((2, 3, 10, 32)), v=mx.zeros((2, 3, 10, 32))), ValueError, "multiple of the key/value heads"),
        (dict(q=mx.zeros((2, 4, 8, 32), mx.int32), k=mx.zeros((2, 2, 10, 32), mx.int32),
              v=mx.zeros((2, 2, 10, 32), mx.int32)), ValueError, "q, k, v must promote to a floating-point"),
        (dict(v=mx.zeros((2, 2, 10, 32), mx.complex64)), ValueError, "promoted: complex64"),
        (dict(mask="upper"), ValueError, "mask must be None, \"causal\""),
        (dict(mask=mx.zeros((3, 10), mx.bool_)), ValueError, "does not broadcast"),
        (dict(mask=mx.zeros((1, 1, 1, 1, 1))), ValueError, "rank at most 4"),
        (dict(mask=mx.zeros((8, 10), mx.float64)), ValueError, "mask must be bool or a type that promotes"),
        (dict(q=mx.zeros((2, 4, 8, 32), mx.float16), k=mx.zeros((2, 2, 10, 32), mx.float16),
              v=mx.zeros((2, 2, 10, 32), mx.float16), mask=mx.zeros((8, 10))), ValueError, "promotes to float16"),
        (dict(mask=[[True]]), TypeError, "mask must be None"),
        (dict(sinks=mx.zeros((2,))), ValueError, r"sinks must have shape \[4\]"),
        (dict(sinks=mx.zeros((4, 1))), ValueError, "sinks must have shape"),
        (dict(sinks=mx.zeros((4,), mx.complex64)), ValueError, "sinks must have a type that promotes"),
        (dict(sinks=[0.0] * 4), TypeError, "sinks must be None or an mlx.core.array"),
        (dict(q=[[1.0]]), TypeError, "q must be an mlx.core.array"),
        (dict(scale="1"), TypeError, "scale must be a real number"),
        (dict(scale=mx.zeros((2,))), TypeError, "scale must be a real number"),
        (dict(scale=float("nan")), ValueError, "scale must be finite"),
    ],
)
def test_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        call(**kwargs)
    if "force_fused" not in kwargs:
        with pytest.raises(error, match=match):
            fa.can_use_fused(
                kwargs.get("q", q), kwargs.get("k", k), kwargs.get("v", v),
                scale=kwargs.get("scale", 1.0), mask=kwargs.get("mask"), sinks=kwargs.get("sinks"),
            )


def test_causal_with_force_fused_on_cpu_is_fine():
    out = call(mask="causal", force_fused=True, stream=mx.cpu)
    assert out.shape == (2, 4, 8, 32)
