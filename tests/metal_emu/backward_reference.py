"""The attention backward in float64 with MLX's semantics (cases.reference
is the forward): the LSE as backward_params.h defines it, and dQ, dK, dV
(dK and dV summed over each GQA group). A bool or causal mask replaces a
score by finfo(dtype).min, a constant, so no gradient reaches q or k there;
an additive mask passes it."""

import numpy as np

from .cases import finfo_min


def scores(q, k, scale, dtype, causal, bool_mask, add_mask, sinks):
    """(scores with the sink's column first if any, hidden: where a bool or
    causal mask hides a key, over the key columns), for [B, H_q, L_q, L_k]."""
    s = scale * (q @ k.transpose(0, 1, 3, 2))
    L_q, L_k = s.shape[-2:]
    hidden = np.zeros(s.shape, bool)
    if causal:
        i = np.arange(L_q)[:, None]
        j = np.arange(L_k)[None, :]
        hidden |= j > i + (L_k - L_q)
    if bool_mask is not None:
        hidden |= ~np.broadcast_to(bool_mask, s.shape)
    s = np.where(hidden, finfo_min(dtype), s)
    if add_mask is not None:
        s = s + add_mask
    if sinks is not None:
        sink_col = np.broadcast_to(sinks[None, :, None, None], s.shape[:-1] + (1,))
        s = np.concatenate([sink_col, s], axis=-1)
    return s, hidden


def backward(q, k, v, do, scale, dtype, causal=False, bool_mask=None, add_mask=None, sinks=None):
    """{"o", "lse", "dq", "dk", "dv"} in float64 for float64 inputs."""
    B, H_q, L_q, D = q.shape
    H_kv = k.shape[1]
    group = H_q // H_kv
    k_r = np.repeat(k, group, axis=1)
    v_r = np.repeat(v, group, axis=1)
    s, hidden = scores(q, k_r, scale, dtype, causal, bool_mask, add_mask, sinks)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = s.max(axis=-1, keepdims=True)
        e = np.exp(s - m)
        lse = (m + np.log(e.sum(axis=-1, keepdims=True)))[..., 0]
        p = e / e.sum(axis=-1, keepdims=True)
    if sinks is not None:
        p = p[..., 1:]
    sees_none = hidden.all(axis=-1) & (sinks is None)
    lse = np.where(sees_none, -np.inf, lse)
    o = p @ v_r
    dp = do @ v_r.transpose(0, 1, 3, 2)
    d = (do * o).sum(axis=-1, keepdims=True)
    ds = np.where(hidden, 0.0, p * (dp - d))
    dq = scale * ds @ k_r
    dk = scale * ds.transpose(0, 1, 3, 2) @ q
    dv = p.transpose(0, 1, 3, 2) @ do
    fold = lambda x: x.reshape(B, H_kv, group, *x.shape[2:]).sum(axis=2)  # noqa: E731
    return {"o": o, "lse": lse, "d": d[..., 0], "dq": dq, "dk": fold(dk), "dv": fold(dv)}
