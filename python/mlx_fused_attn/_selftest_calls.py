"""The calls `python -m mlx_fused_attn.selftest` checks, one builder an op:
the attention op (general, short sequences, strided inputs), neighborhood
attention, and attention over a quantized K/V cache. Each kernel family's
cases (its folder's <folder>_selftest.py, installed as
mlx_fused_attn.selftest_cases.<folder>) build their calls here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import mlx.core as mx
import numpy as np

import mlx_fused_attn as fa
from mlx_fused_attn import _reference as ref

DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32}


@dataclasses.dataclass
class Case:
    """One call of one kernel family, and how to check it."""

    family: str  # the kernel family meant to serve it
    name: str
    dtype: str
    head_dim: int
    seed: int
    ours: Callable[[], mx.array]
    mx_fast: Callable[[mx.Device], mx.array]  # the same attention by mx.fast
    reference: Callable[[], np.ndarray]  # float64
    can_fuse: Callable[[], tuple]
    # What mx_fast runs, for the table: "mx.fast" with the same arguments,
    # "mx.fast+mask" with the neighborhood as a dense bool mask, or
    # "mx.fast+deq" over the quantized cache's K and V, dequantized.
    yardstick: str = "mx.fast"


def normal(shape, dtype, seed):
    return mx.random.normal(shape, key=mx.random.key(seed)).astype(dtype)


def qkv_tensor(layout, b, h, length, d, dtype, seed):
    """[b, h, length, d] as the layout lays it out: "contiguous"; "blhd", the
    transposed view of a [b, length, h, d] array (read in place); or
    "d-strided", a view whose head dim is not contiguous (copied first by
    the strided-copy kernels on Metal)."""
    if layout == "contiguous":
        return normal((b, h, length, d), dtype, seed)
    if layout == "blhd":
        return normal((b, length, h, d), dtype, seed).transpose(0, 2, 1, 3)
    if layout == "d-strided":
        return normal((b, h, d, length), dtype, seed).swapaxes(-1, -2)
    raise ValueError(f"unknown layout {layout!r}")


def attention_case(family, name, *, dtype, d, seed, device, lq, lk, b=2, hq=4, hkv=4,
                   mask=None, sinks=False, layout="contiguous"):  # fmt: skip
    dt = DTYPES[dtype]
    q = qkv_tensor(layout, b, hq, lq, d, dt, seed)
    k = qkv_tensor(layout, b, hkv, lk, d, dt, seed + 1)
    v = qkv_tensor(layout, b, hkv, lk, d, dt, seed + 2)
    if mask == "bool":
        # Broadcast over batch and heads (read through zero strides).
        m = mx.random.bernoulli(0.75, (lq, lk), key=mx.random.key(seed + 3))
    elif mask == "additive":
        m = normal((b, 1, lq, lk), dt, seed + 3)
    else:
        m = mask
    s = normal((hq,), dt, seed + 4) if sinks else None
    scale = d**-0.5
    args = dict(scale=scale, mask=m, sinks=s)
    return Case(
        family, name, dtype, d, seed,
        ours=lambda: fa.scaled_dot_product_attention(q, k, v, **args, stream=device),
        mx_fast=lambda dev: mx.fast.scaled_dot_product_attention(q, k, v, **args, stream=dev),
        reference=lambda: ref.attention(q, k, v, scale, m, s),
        can_fuse=lambda: fa.can_use_fused(q, k, v, **args, stream=device),
    )  # fmt: skip


def neighborhood_case(name, *, dtype, d, seed, device, spatial, kernel, dilation=1,
                      causal=False, heads=2):  # fmt: skip
    dt = DTYPES[dtype]
    shape = (1, *spatial, heads, d)
    q, k, v = (normal(shape, dt, seed + i) for i in range(3))
    axes = len(spatial)
    kernels, dilations = [kernel] * axes, [dilation] * axes
    causals = [causal] * axes
    mask = mx.array(ref.neighborhood_mask(spatial, kernels, dilations, causals))
    length = int(np.prod(spatial))
    scale = d**-0.5

    def heads_first(x):
        return x.reshape(1, length, heads, d).transpose(0, 2, 1, 3)

    def mx_fast(dev):
        out = mx.fast.scaled_dot_product_attention(
            heads_first(q), heads_first(k), heads_first(v), scale=scale, mask=mask, stream=dev
        )
        return out.transpose(0, 2, 1, 3).reshape(shape)

    def reference():
        out = ref.attention(heads_first(q), heads_first(k), heads_first(v), scale, mask)
        return out.transpose(0, 2, 1, 3).reshape(shape)

    na_args = dict(dilation=tuple(dilations), is_causal=tuple(causals), scale=scale)
    return Case(
        "neighborhood", name, dtype, d, seed,
        ours=lambda: fa.neighborhood_attention(q, k, v, tuple(kernels), **na_args, stream=device),
        mx_fast=mx_fast,
        reference=reference,
        can_fuse=lambda: fa.neighborhood_can_use_fused(q, k, v, tuple(kernels), **na_args,
                                                      stream=device),
        yardstick="mx.fast+mask",
    )  # fmt: skip


def quantized_case(name, *, dtype, d, seed, device, lq, lk, bits, group, hq=8, hkv=2,
                   mask=None):  # fmt: skip
    """The quantized K/V family: K and V quantized by mx.quantize, checked
    against the float64 reference over the dequantized K and V; the
    yardstick is mx.fast over them in the case's dtype."""
    dt = DTYPES[dtype]
    q = normal((2, hq, lq, d), dt, seed)
    qk, qv = (tuple(mx.quantize(normal((2, hkv, lk, d), dt, seed + i), group_size=group,
                                bits=bits)) for i in (1, 2))  # fmt: skip
    k32, v32 = (mx.dequantize(*x, group_size=group, bits=bits, dtype=mx.float32)
                for x in (qk, qv))  # fmt: skip
    scale = d**-0.5
    return Case(
        "quantized_attention", name, dtype, d, seed,
        ours=lambda: fa.quantized_scaled_dot_product_attention(
            q, qk, qv, scale, mask, group, bits, stream=device),
        mx_fast=lambda dev: mx.fast.scaled_dot_product_attention(
            q, k32.astype(dt), v32.astype(dt), scale=scale, mask=mask, stream=dev),
        reference=lambda: ref.attention(q, k32, v32, scale, mask),
        can_fuse=lambda: fa.quantized_can_use_fused(
            q, qk, qv, scale, mask, group, bits, stream=device),
        yardstick="mx.fast+deq",
    )  # fmt: skip


def general_lengths(quick):
    """L_q and L_k of the cases the general kernel runs."""
    return dict(lq=100, lk=130) if quick else dict(lq=257, lk=1000)
