"""Float64 NumPy references for the selftest, with exactly the semantics of
``mx.fast.scaled_dot_product_attention`` and of NATTEN's windows (as
README.md states them). Slow and plain on purpose: every step is the math."""

from __future__ import annotations

import mlx.core as mx
import numpy as np


def to_float64(x: mx.array) -> np.ndarray:
    # Through float32: NumPy has no bfloat16, and float32 holds every
    # float16 and bfloat16 value exactly.
    return np.array(x.astype(mx.float32)).astype(np.float64)


def attention(q, k, v, scale, mask=None, sinks=None) -> np.ndarray:
    """softmax(scale q k^T + mask) v for mx arrays q [B, H_q, L_q, D],
    k [B, H_kv, L_k, D], v [B, H_kv, L_k, D_v]. A boolean or causal mask
    (bottom-right aligned) replaces a score by finfo(dtype).min, so a row
    masked everywhere averages v; an additive mask is added; sinks [H_q]
    are unscaled extra logits that take softmax mass and no value."""
    qn, kn, vn = to_float64(q), to_float64(k), to_float64(v)
    batch, heads, lq, _ = qn.shape
    lk = kn.shape[2]
    group = heads // kn.shape[1]
    kn = np.repeat(kn, group, axis=1)
    vn = np.repeat(vn, group, axis=1)
    s = scale * np.einsum("bhqd,bhkd->bhqk", qn, kn)
    lowest = float(mx.finfo(q.dtype).min)
    if isinstance(mask, str):
        allowed = np.arange(lk)[None, :] <= np.arange(lq)[:, None] + (lk - lq)
        s = np.where(allowed, s, lowest)
    elif mask is not None and mask.dtype == mx.bool_:
        s = np.where(np.broadcast_to(np.array(mask), s.shape), s, lowest)
    elif mask is not None:
        s = s + np.broadcast_to(to_float64(mask), s.shape)
    if sinks is not None:
        logits = np.broadcast_to(to_float64(sinks)[None, :, None, None], (batch, heads, lq, 1))
        s = np.concatenate([logits, s], axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
    if sinks is not None:
        p = p[..., 1:]
    return np.einsum("bhqk,bhkd->bhqd", p, vn)


def window_1d(n: int, kernel: int, dilation: int, causal: bool) -> np.ndarray:
    """[n, n] booleans: which positions of an axis of length n each position
    sees. Positions split into `dilation` interleaved groups; in a group of
    length m the query at index j sees the `kernel` positions from
    clamp(j - kernel // 2, 0, m - kernel), or max(0, j - kernel + 1) .. j
    when causal."""
    allowed = np.zeros((n, n), dtype=bool)
    for i in range(n):
        group, j = i % dilation, i // dilation
        m = len(range(group, n, dilation))
        if causal:
            first, last = max(0, j - kernel + 1), j
        else:
            first = min(max(j - kernel // 2, 0), m - kernel)
            last = first + kernel - 1
        allowed[i, [group + t * dilation for t in range(first, last + 1)]] = True
    return allowed


def neighborhood_mask(shape, kernels, dilations, causals) -> np.ndarray:
    """[L, L] booleans over the flattened spatial positions (row-major) of
    `shape`: the product of each axis's window."""
    allowed = np.ones((1, 1), dtype=bool)
    for n, kernel, dilation, causal in zip(shape, kernels, dilations, causals):
        axis = window_1d(n, kernel, dilation, causal)
        size = allowed.shape[0] * n
        allowed = (allowed[:, None, :, None] & axis[None, :, None, :]).reshape(size, size)
    return allowed
