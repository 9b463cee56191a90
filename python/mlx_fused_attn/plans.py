"""What this package's planner makes of a call: the kernel family, its
tiles, the key splits and a reason code with its message
(``mlx_fused_attn/plan/plan_summary.h``). Code that decides by the plan
(routing, the tuner) switches on ``code``; ``message`` is for people.
"""

from __future__ import annotations

from typing import NamedTuple

import mlx.core as mx

# The codes, as plan_summary.h's PlanCode names them.
CPU_KERNEL = "cpu_kernel"  # the CPU kernel runs the call
SHORT_KERNEL = "short_kernel"  # the short-sequence kernel
KEYS_SPLIT = "keys_split"  # the general kernel, keys split over a grid under one wave
GENERAL_KERNEL = "general_kernel"  # the general kernel, keys unsplit
NO_KERNEL = "no_kernel"  # no fused kernel: plain MLX ops, for the message's reason
CODES = (CPU_KERNEL, SHORT_KERNEL, KEYS_SPLIT, GENERAL_KERNEL, NO_KERNEL)


class PlanSummary(NamedTuple):
    """One call's plan."""

    code: str  # one of CODES
    message: str  # which kernel runs and how, or why none does
    family: str  # the kernel family's name ("attention", "short_attention"); "" for none
    key_splits: int  # ways each query block's keys are split (1: unsplit)
    packed_gqa: bool  # decoding: a key/value head's query heads are one block's rows
    tiles: dict  # the family's tiles by field name; empty on the CPU
    # CUDA: the kernel's last split merges the key splits (no combine kernel)
    split_merge: bool = False
    # The combine kernel's form where one merges the key splits: "one_element",
    # "grouped" or "row" (CUDA at 8 splits and more: a threadgroup a row where
    # the output is small, as at decode; MLX_FUSED_ATTN_SPLIT_COMBINE forces
    # one); "" where none runs
    combine_form: str = ""

    @property
    def fused(self) -> bool:
        return self.code != NO_KERNEL


class PlanHint(NamedTuple):
    """A choice among the plans that compute the same attention
    (``mlx_fused_attn/plan/plan_hint.h``); the default is the planner's own."""

    short_kernel: bool = True  # False: the general kernel takes short sequences
    max_key_splits: int = 0  # above 0: split the keys at most this many ways
    metal_variant: str | None = None  # Metal: MLX_FUSED_ATTN_METAL_VARIANT's grammar

    def kwargs(self) -> dict:
        """The extension's keywords for this hint."""
        return self._asdict()


def plan_summary(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    scale: float,
    mask: None | str | mx.array = None,
    sinks: mx.array | None = None,
    stream: None | mx.Stream | mx.Device = None,
    hint: PlanHint = PlanHint(),
) -> PlanSummary:
    """The plan ``scaled_dot_product_attention`` makes for these arguments
    (with ``hint``'s choice where the call has several). Invalid arguments
    raise as the op does."""
    from . import _check_types, _ext, _report_notices

    scale = _check_types(q, k, v, scale, mask, sinks)
    try:
        d = _ext.plan_summary(
            q, k, v, scale=scale, mask=mask, sinks=sinks, stream=stream, **hint.kwargs()
        )
    finally:
        _report_notices()
    return PlanSummary(**d)
