"""Packed variable-length batches: sequences of different lengths laid end
to end along the sequence axis of ``[1, H, total, D]``, with FlashAttention's
``cu_seqlens`` offsets, and the helpers that go between that and an mlx-lm
style padded batch ``[B, H, L, D]``."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

_PADDINGS = ("right", "left")


def _offsets(cu_seqlens, name: str, total: int, op: str = "varlen_attention") -> list[int]:
    """The offsets as Python ints, checked: 0 first, non-decreasing, `total`
    last."""
    if isinstance(cu_seqlens, mx.array):
        if cu_seqlens.dtype not in (mx.int32, mx.int64, mx.uint32, mx.uint64):
            raise TypeError(
                f"[{op}] {name} must be an integer array (int32); got "
                f"{cu_seqlens.dtype}"
            )
        values = cu_seqlens.tolist()
    else:
        values = np.asarray(cu_seqlens).tolist()
    if not isinstance(values, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) for x in values
    ):
        raise TypeError(
            f"[{op}] {name} must be a 1-D sequence of integer offsets; "
            f"got {cu_seqlens!r}"
        )
    if (
        len(values) < 2
        or values[0] != 0
        or values[-1] != total
        or any(b < a for a, b in zip(values, values[1:]))
    ):
        raise ValueError(
            f"[{op}] {name} must start at 0, never decrease and end at the "
            f"packed length {total}; got {values}"
        )
    return values


def varlen_attention(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    cu_seqlens_q,
    cu_seqlens_k=None,
    *,
    scale: float,
    causal: bool = False,
    return_lse: bool = False,
    stream: None | mx.Stream | mx.Device = None,
) -> mx.array | tuple[mx.array, mx.array]:
    """Attention within each sequence of a packed batch: sequence ``i``'s
    queries ``q[:, :, cu_seqlens_q[i]:cu_seqlens_q[i + 1]]`` attend to its
    keys and values ``[cu_seqlens_k[i]:cu_seqlens_k[i + 1]]`` only, and no
    padding is computed.

    Args:
        q: ``[1, H_q, total_q, D]``; k: ``[1, H_kv, total_k, D]``; v:
            ``[1, H_kv, total_k, D_v]`` (GQA as in
            ``scaled_dot_product_attention``).
        cu_seqlens_q: ``n + 1`` int32 offsets of the ``n`` query sequences
            (an mlx array, NumPy array or list), from 0 to ``total_q``. They
            are read on the host: the call evaluates them.
        cu_seqlens_k: the same for the keys; default ``cu_seqlens_q``.
        scale: multiplies ``q k^T``.
        causal: causal within each sequence, bottom-right aligned as
            mx.fast's ``"causal"``: query ``i`` of a sequence with ``L_q``
            queries and ``L_k`` keys sees key ``j`` iff ``j <= i + L_k -
            L_q`` (with ``L_q == L_k`` the usual triangle; a query no key is
            visible to averages v, as in mx.fast).
        return_lse: also return the float32 LSE ``[1, H_q, total_q]``.

    Returns:
        ``[1, H_q, total_q, D_v]`` (and the LSE). Each sequence runs as one
        fused call (its kernel on the CPU or GPU, forward and backward), so
        the work is that of the sequences' own lengths; gradients reach q,
        k and v.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, mx.array) or x.ndim != 4 or x.shape[0] != 1:
            shape = x.shape if isinstance(x, mx.array) else type(x).__name__
            raise ValueError(
                f"[varlen_attention] {name} must be a packed batch [1, H, total, D]; "
                f"got {shape}"
            )
    if not isinstance(causal, bool):
        raise TypeError(f"[varlen_attention] causal must be a bool; got {causal!r}")
    if cu_seqlens_k is None:
        if k.shape[2] != q.shape[2]:
            raise ValueError(
                "[varlen_attention] cu_seqlens_k is required when q and k have "
                f"different packed lengths ({q.shape[2]} and {k.shape[2]})"
            )
        cu_seqlens_k = cu_seqlens_q
    offs_q = _offsets(cu_seqlens_q, "cu_seqlens_q", q.shape[2])
    offs_k = _offsets(cu_seqlens_k, "cu_seqlens_k", k.shape[2])
    if len(offs_q) != len(offs_k):
        raise ValueError(
            "[varlen_attention] cu_seqlens_q and cu_seqlens_k must describe as many "
            f"sequences; got {len(offs_q) - 1} and {len(offs_k) - 1}"
        )
    from . import scaled_dot_product_attention

    mask = "causal" if causal else None
    outs, lses = [], []
    for i, (q0, q1, k0, k1) in enumerate(zip(offs_q, offs_q[1:], offs_k, offs_k[1:])):
        if q1 == q0:
            continue
        if k1 == k0:
            raise ValueError(
                f"[varlen_attention] sequence {i} has {q1 - q0} queries and no keys"
            )
        got = scaled_dot_product_attention(
            q[:, :, q0:q1], k[:, :, k0:k1], v[:, :, k0:k1], scale=scale, mask=mask,
            return_lse=return_lse, stream=stream,
        )  # fmt: skip
        if return_lse:
            outs.append(got[0])
            lses.append(got[1])
        else:
            outs.append(got)
    if not outs:
        out = mx.zeros((1, q.shape[1], 0, v.shape[3]), dtype=q.dtype)
        lse = mx.zeros((1, q.shape[1], 0), dtype=mx.float32)
    else:
        out = mx.concatenate(outs, axis=2)
        lse = mx.concatenate(lses, axis=2) if return_lse else None
    return (out, lse) if return_lse else out


def _lengths(lengths, batch: int, max_len: int) -> list[int]:
    values = lengths.tolist() if isinstance(lengths, mx.array) else np.asarray(lengths).tolist()
    if (
        not isinstance(values, list)
        or len(values) != batch
        or not all(isinstance(n, int) and 0 <= n <= max_len for n in values)
    ):
        raise ValueError(
            f"lengths must hold {batch} integers in [0, {max_len}] (one per batch "
            f"entry); got {lengths!r}"
        )
    return values


def _check_padding(padding: str) -> None:
    if padding not in _PADDINGS:
        raise ValueError(f"padding must be one of {_PADDINGS}; got {padding!r}")


def pack_padded(x: mx.array, lengths, *, padding: str = "right") -> tuple[mx.array, mx.array]:
    """A padded batch ``x`` ``[B, H, L, D]`` (mlx-lm's layout after the
    heads transpose) with ``lengths[b]`` real tokens per entry, packed into
    ``([1, H, sum(lengths), D], cu_seqlens)``, ``cu_seqlens`` int32
    ``[B + 1]``. ``padding="right"``: an entry's tokens come first;
    ``"left"`` (mlx-lm's batched generation): they come last."""
    if not isinstance(x, mx.array) or x.ndim != 4:
        raise ValueError(f"[pack_padded] x must be [B, H, L, D]; got {getattr(x, 'shape', x)!r}")
    _check_padding(padding)
    B, _, L, _ = x.shape
    ns = _lengths(lengths, B, L)
    parts = [
        x[b : b + 1, :, :n] if padding == "right" else x[b : b + 1, :, L - n :]
        for b, n in enumerate(ns)
    ]
    packed = mx.concatenate(parts, axis=2)
    return packed, mx.array(np.concatenate([[0], np.cumsum(ns)]).astype(np.int32))


def unpack_padded(
    packed: mx.array, cu_seqlens, max_len: int, *, padding: str = "right"
) -> mx.array:
    """The inverse of ``pack_padded``: ``[1, H, total, D]`` and its offsets
    back to ``[B, H, max_len, D]``, zeros in the padding."""
    if not isinstance(packed, mx.array) or packed.ndim != 4 or packed.shape[0] != 1:
        raise ValueError(
            f"[unpack_padded] packed must be [1, H, total, D]; got {getattr(packed, 'shape', packed)!r}"
        )
    _check_padding(padding)
    offs = _offsets(cu_seqlens, "cu_seqlens", packed.shape[2], "unpack_padded")
    rows = []
    for a, b in zip(offs, offs[1:]):
        if b - a > max_len:
            raise ValueError(f"[unpack_padded] a sequence of {b - a} tokens exceeds max_len {max_len}")
        seq = packed[:, :, a:b]
        pad = [(0, 0), (0, 0), (0, max_len - (b - a)), (0, 0)]
        if padding == "left":
            pad[2] = (max_len - (b - a), 0)
        rows.append(mx.pad(seq, pad))
    return mx.concatenate(rows, axis=0)
