"""Attention over a union of disjoint key sets from the attentions over each
set: what split-key decoding and ring attention do with the ``(out, lse)``
pairs of ``scaled_dot_product_attention(..., return_lse=True)``."""

from __future__ import annotations

import mlx.core as mx


def _checked(outs, lses):
    outs, lses = list(outs), list(lses)
    if not outs or len(outs) != len(lses):
        raise ValueError(
            "[merge_attention] outs and lses must be non-empty sequences of the same "
            f"length; got {len(outs)} outputs and {len(lses)} LSEs"
        )
    for i, (o, lse) in enumerate(zip(outs, lses)):
        if not isinstance(o, mx.array) or not isinstance(lse, mx.array):
            raise TypeError(
                f"[merge_attention] outs[{i}] and lses[{i}] must be mlx.core.array; "
                f"got {type(o).__name__} and {type(lse).__name__}"
            )
        if o.shape != outs[0].shape or o.ndim < 1 or lse.shape != o.shape[:-1]:
            raise ValueError(
                f"[merge_attention] outs[{i}] must have the shape of outs[0] "
                f"{outs[0].shape} and lses[{i}] that shape without its last axis; got "
                f"{o.shape} and {lse.shape}"
            )
    return outs, lses


def merge_attention(outs, lses) -> tuple[mx.array, mx.array]:
    """Merge attention outputs over disjoint key sets into the output over
    their union, exactly: with weights ``w_i = exp(lse_i - lse)``,
    ``out = sum_i w_i out_i`` and ``lse = log(sum_i exp(lse_i))``.

    Args:
        outs: outputs ``[..., L_q, D_v]`` (e.g. ``[B, H_q, L_q, D_v]``), one
            per key set, all of one shape.
        lses: their log-sum-exps ``[..., L_q]`` in the convention of
            ``scaled_dot_product_attention(..., return_lse=True)``: natural
            log, ``-inf`` where a row saw no key of that set (that partial
            then has no weight, whatever its output holds).

    Returns:
        ``(out, lse)``: ``out`` in the dtype of ``outs[0]`` (accumulated in
        float32), ``lse`` float32. A row no partial saw (every ``lse_i`` is
        ``-inf``) gets ``out = 0`` and ``lse = -inf``. Differentiable in
        every input.
    """
    outs, lses = _checked(outs, lses)
    lse_all = mx.stack([x.astype(mx.float32) for x in lses])
    top = mx.max(lse_all, axis=0)
    # A row no partial saw has top = -inf; shifting by 0 keeps its weights
    # exp(-inf) = 0 instead of exp(-inf - -inf) = NaN.
    shift = mx.where(mx.isfinite(top), top, 0.0)
    weights = mx.exp(lse_all - shift)
    total = mx.sum(weights, axis=0)
    seen = total > 0
    safe_total = mx.where(seen, total, 1.0)
    # A partial that saw no key may hold anything (NaN under an additive
    # -inf mask): zero weight times NaN is NaN, so it is left out instead.
    acc = sum(
        weights[i][..., None]
        * mx.where(mx.isfinite(lse_all[i])[..., None], outs[i].astype(mx.float32), 0.0)
        for i in range(len(outs))
    )
    out = mx.where(seen[..., None], acc / safe_total[..., None], 0.0)
    lse = mx.where(seen, shift + mx.log(safe_total), -mx.inf)
    return out.astype(outs[0].dtype), lse
