"""Shape classes: the calls one tuned choice serves.

A class is the dtype, the head dims of q/k and of v, the mask's kind
(none, ``"causal"``, a bool array, an additive array) and whether sinks
come, the GQA ratio ``H_q / H_kv``, three sizes each rounded up to a
power of two: ``B * H_q`` (the grid's rows, which decide whether a grid
fills the GPU and whether keys are split), ``L_q`` and ``L_k``, and whether
the call is trained (its forward and backward timed together: the
backward, cuDNN's against ours, can change the winner). The device is the
tuned table's, not the class's.

Why reusing one class's winner for every call in it is safe: every
candidate computes the same attention (the fused plans differ only in
tiles, key splits and kernel variant, each tested against the reference),
so a class decides speed, never the result. Within a class each size
differs by at most 2x, and what flips a winner jumps at a power of two or
is in the class itself: the short kernel's reach (L <= 64), cuDNN's head
dims, the mask kind (mx.fast runs bool masks as plain MLX ops), a grid
against a wave of the GPU. A hint a call's plan cannot take (the short
kernel off for a call it does not take) leaves that plan as it is. The
mask's content is left out: reading it would wait in the hot path, and
docs/routing.md ("Shape classes") says why the choice does not need it.
"""

from __future__ import annotations

from typing import NamedTuple

import mlx.core as mx

MASK_KINDS = ("none", "causal", "bool", "additive")


def bucket(n: int) -> int:
    """The smallest power of two at least ``n`` (``n >= 1``): the top of
    ``n``'s bucket."""
    return 1 << max(0, int(n) - 1).bit_length()


class ShapeClass(NamedTuple):
    dtype: str  # "float16", "bfloat16", "float32"
    head_dim: int
    head_dim_v: int
    mask: str  # one of MASK_KINDS
    sinks: bool
    gqa: int  # H_q / H_kv
    rows: int  # bucket(B * H_q)
    queries: int  # bucket(L_q)
    keys: int  # bucket(L_k)
    training: bool = False  # forward and backward

    def key(self) -> str:
        """The class as the tuned table's JSON names it."""
        sinks = "+sinks" if self.sinks else ""
        return (
            f"{self.dtype} D={self.head_dim}/{self.head_dim_v} mask={self.mask}{sinks} "
            f"gqa={self.gqa} BH<={self.rows} Lq<={self.queries} Lk<={self.keys}"
            + (" training" if self.training else "")
        )

    @classmethod
    def from_key(cls, key: str) -> ShapeClass:
        """The class ``key()`` wrote; ValueError names a malformed key."""
        try:
            words = key.split(" ")
            training = words[-1] == "training"
            dtype, dims, mask, gqa, rows, queries, keys = words[:-1] if training else words
            d, dv = dims.removeprefix("D=").split("/")
            mask = mask.removeprefix("mask=")
            sinks = mask.endswith("+sinks")
            mask = mask.removesuffix("+sinks")
            parsed = cls(
                dtype, int(d), int(dv), mask, sinks, int(gqa.removeprefix("gqa=")),
                int(rows.removeprefix("BH<=")), int(queries.removeprefix("Lq<=")),
                int(keys.removeprefix("Lk<=")), training,
            )  # fmt: skip
        except ValueError as e:
            raise ValueError(f"shape class {key!r} is malformed ({e})") from None
        if parsed.key() != key or mask not in MASK_KINDS:
            raise ValueError(f"shape class {key!r} is malformed")
        return parsed


def mask_kind(mask) -> str | None:
    """The class's name for a mask argument; None for one the op rejects."""
    if mask is None:
        return "none"
    if isinstance(mask, str):
        return "causal" if mask == "causal" else None
    if isinstance(mask, mx.array):
        return "bool" if mask.dtype == mx.bool_ else "additive"
    return None


def class_of_sizes(
    *, B: int, H_q: int, H_kv: int, L_q: int, L_k: int, D: int, D_v: int,
    dtype: str, mask: str, sinks: bool = False, training: bool = False,
) -> ShapeClass:  # fmt: skip
    return ShapeClass(
        dtype, D, D_v, mask, sinks, H_q // H_kv, bucket(B * H_q), bucket(L_q), bucket(L_k),
        training,
    )  # fmt: skip


def shape_class(q, k, v, mask=None, sinks=None, training=False) -> ShapeClass | None:
    """The class of a call (``training``: traced for a gradient), or None
    where it has none (not 4-D arrays, a
    dtype without a kernel, heads that do not group, a mask the op
    rejects): such calls are left to the rules."""
    if not all(isinstance(x, mx.array) and x.ndim == 4 for x in (q, k, v)):
        return None
    kind = mask_kind(mask)
    dtype = str(q.dtype).removeprefix("mlx.core.")
    if kind is None or dtype not in ("float16", "bfloat16", "float32"):
        return None
    B, H_q, L_q, D = q.shape
    H_kv, L_k = k.shape[1], k.shape[2]
    if min(B, H_q, L_q, L_k, H_kv) < 1 or H_q % H_kv:
        return None
    return class_of_sizes(
        B=B, H_q=H_q, H_kv=H_kv, L_q=L_q, L_k=L_k, D=D, D_v=v.shape[3],
        dtype=dtype, mask=kind, sinks=sinks is not None, training=training,
    )  # fmt: skip
