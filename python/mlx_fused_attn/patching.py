"""``patch_mx_fast``: make code that calls
``mx.fast.scaled_dot_product_attention`` (every mlx-lm model, ``mlx.nn``'s
attention layers) run this package's kernels where they pay.

mlx-lm's models import ``mlx_lm.models.base.scaled_dot_product_attention``
by name, and that function looks up ``mx.fast.scaled_dot_product_attention``
at each call; replacing the attribute on ``mx.fast`` is therefore the one
place that reaches every model. What it cannot reach:

- a function ``mx.compile`` has already traced: MLX keeps one trace per
  Python function and input shapes while a compiled version of it lives,
  so calls with shapes traced before patching replay the op recorded then
  (mx.fast), even through a new ``mx.compile`` of the same function. Patch
  before the first compiled call (new shapes trace again and are routed);
- code that saved ``mx.fast.scaled_dot_product_attention`` in a variable of
  its own before patching.

Training: while a patch is active, ``mx.grad``, ``mx.value_and_grad`` and
``mx.vjp`` are replaced too (``gradient_trace.py``), so that ``route`` knows
a call is traced for a gradient and weighs the backward it brings. A
function one of them made before the patch is not marked (its calls route
as inference): make the gradient function inside the patch.

mlx-lm's ``QuantizedKVCache`` never calls mx.fast: its attention is
``mlx_lm.models.base.quantized_scaled_dot_product_attention``, which that
module's ``scaled_dot_product_attention`` looks up among its globals at each
call (no model imports it). The patch replaces that module attribute too,
as soon as ``mlx_lm.models.base`` is imported (now, or later through an
import hook: importing mlx-lm costs seconds, so the patch never does it),
with this package's fused op where a kernel covers the call and mlx-lm's
function otherwise.

The patch is process-wide (``mx.fast`` is one module). Patches nest: each
``patch_mx_fast()`` adds one, a context exit removes its own, and
``mx.fast`` gets its original function back when the last one goes.
``unpatch_mx_fast()`` removes them all; with none active it does nothing
and returns False. The policy in force is that of the newest active patch.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from typing import NamedTuple

import mlx.core as mx

import mlx_fused_attn as _package  # this module loads while the package does

from . import gradient_trace
from .routing import FALLBACK, FUSED, PASSTHROUGH, POLICIES, route


class PatchStats(NamedTuple):
    """Calls through the patched mx.fast, by where they ran (see ``route``)."""

    fused: int  # this package's fused kernel
    fallback: int  # mx.fast: no fused kernel of this package covers the call
    passed_through: int  # mx.fast: faster than ours for the call on this device

    def __sub__(self, other: PatchStats) -> PatchStats:
        return PatchStats(*(a - b for a, b in zip(self, other)))


_FIELD = {FUSED: 0, FALLBACK: 1, PASSTHROUGH: 2}

# Guards the patch state below and the counters; the patched function reads
# `_policy` and `_original` without it (each a single attribute read).
_lock = threading.Lock()
_active: list[MxFastPatch] = []
_installed = False
# What mx.fast held when our function went in. Kept after unpatching, so that
# a thread still holding our function (fetched before the unpatch) runs on.
_original = None
_policy = "auto"  # the newest active patch's policy
_counts = [0, 0, 0]

# mlx-lm's module whose global the quantized K/V cache's attention is, and
# what that global held when ours went in (kept after unpatching, as
# _original).
_MLX_LM_BASE = "mlx_lm.models.base"
_QUANTIZED = "quantized_scaled_dot_product_attention"
_original_quantized = None


def patch_stats() -> PatchStats:
    """Calls through the patched mx.fast since the process started."""
    with _lock:
        return PatchStats(*_counts)


def scaled_dot_product_attention(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    scale: float,
    mask: None | str | mx.array = None,
    sinks: mx.array | None = None,
    force_fused: bool = False,
    stream: None | mx.Stream | mx.Device = None,
) -> mx.array:
    """``mx.fast.scaled_dot_product_attention`` as ``patch_mx_fast`` installs
    it: the same arguments and results, run by this package's fused kernel
    (with the plan hint of the tuned table, where it has one) where ``route``
    says so and by the original mx.fast otherwise.
    ``force_fused=True`` takes this package's kernel wherever one covers the
    call, and otherwise passes the flag on to mx.fast (which raises where it
    has no fused kernel either)."""
    original = _original
    policy = "fused" if force_fused else _policy
    decided = route(q, k, v, scale=scale, mask=mask, sinks=sinks, stream=stream, policy=policy)
    with _lock:
        _counts[_FIELD[decided.choice]] += 1
    if decided.choice == FUSED:
        # route() took the call to a fused kernel only on arguments the
        # package accepts: checked once.
        return _package._fused_call(q, k, v, float(scale), mask, sinks, False, stream,
                                    decided.hint)  # fmt: skip
    return original(
        q, k, v, scale=scale, mask=mask, sinks=sinks, force_fused=force_fused, stream=stream
    )


def quantized_scaled_dot_product_attention(
    queries: mx.array,
    q_keys: tuple[mx.array, mx.array, mx.array],
    q_values: tuple[mx.array, mx.array, mx.array],
    scale: float,
    mask: None | str | mx.array,
    group_size: int = 64,
    bits: int = 8,
) -> mx.array:
    """``mlx_lm.models.base.quantized_scaled_dot_product_attention`` as
    ``patch_mx_fast`` installs it: this package's fused op where a kernel
    covers the call (counted ``fused``), mlx-lm's own function otherwise
    (counted ``fallback``), arguments it does not take included. Either way
    the caller's ``queries`` ends up scaled, as mlx-lm's ``queries *= scale``
    leaves it (MLX's in-place ``*=`` updates the caller's array object)."""
    original = _original_quantized
    try:
        fused, _ = _package.quantized_can_use_fused(
            queries, q_keys, q_values, scale, mask, group_size, bits
        )
    except (TypeError, ValueError):
        fused = False
    with _lock:
        _counts[_FIELD[FUSED if fused else FALLBACK]] += 1
    if fused:
        out = _package.quantized_scaled_dot_product_attention(
            queries, q_keys, q_values, scale, mask, group_size, bits
        )
        # Lazy: only a caller that reads its queries again evaluates this.
        queries *= scale
        return out
    return original(queries, q_keys, q_values, scale=scale, mask=mask,
                    group_size=group_size, bits=bits)  # fmt: skip


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches mlx_lm.models.base when it is imported while a patch is
    active: the finder wraps the module's loader."""

    def find_spec(self, name, path, target=None):
        if name != _MLX_LM_BASE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            with _lock:
                if _installed:
                    _patch_quantized(module)

        spec.loader.exec_module = exec_and_patch
        return spec


_import_hook = _PatchOnImport()


def _patch_quantized(base) -> None:
    """Put our function in mlx-lm's module (called with the lock held)."""
    global _original_quantized
    current = getattr(base, _QUANTIZED, None)
    if current is not None and current is not quantized_scaled_dot_product_attention:
        _original_quantized = current
        setattr(base, _QUANTIZED, quantized_scaled_dot_product_attention)


def _settle_quantized(install: bool) -> None:
    """Install or restore mlx-lm's quantized attention (called with the lock
    held, by _settle)."""
    base = sys.modules.get(_MLX_LM_BASE)
    if install:
        if base is not None:
            _patch_quantized(base)
        elif _import_hook not in sys.meta_path:
            sys.meta_path.insert(0, _import_hook)
        return
    if _import_hook in sys.meta_path:
        sys.meta_path.remove(_import_hook)
    if base is None or _original_quantized is None:
        return
    if getattr(base, _QUANTIZED, None) is quantized_scaled_dot_product_attention:
        setattr(base, _QUANTIZED, _original_quantized)
    else:
        warnings.warn(
            f"[unpatch_mx_fast] {_MLX_LM_BASE}.{_QUANTIZED} was replaced after "
            "patch_mx_fast; leaving the replacement in place",
            RuntimeWarning,
            stacklevel=4,
        )


class MxFastPatch:
    """One active ``patch_mx_fast()``: a context manager whose exit removes
    this patch (``remove()`` does the same outside a ``with``)."""

    def __init__(self, policy: str):
        self.policy = policy
        self._start = patch_stats()
        self._end: PatchStats | None = None

    @property
    def active(self) -> bool:
        with _lock:
            return self in _active

    @property
    def stats(self) -> PatchStats:
        """Calls through the patched mx.fast while this patch was active
        (calls of other threads included; a function ``mx.compile`` traced
        counts once per trace, not per call)."""
        return (self._end or patch_stats()) - self._start

    def remove(self) -> bool:
        """Remove this patch; False where it was removed already."""
        with _lock:
            if self not in _active:
                return False
            _active.remove(self)
            self._end = PatchStats(*_counts)
            _settle()
            return True

    def __repr__(self) -> str:
        state = "active" if self.active else "removed"
        return f"MxFastPatch(policy={self.policy!r}, {state}, stats={self.stats!r})"

    def __enter__(self) -> MxFastPatch:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _settle() -> None:
    """Install or restore mx.fast's function for the active patches (called
    with the lock held)."""
    global _installed, _original, _policy
    if _active:
        if not _installed:
            _installed = True
            _original = mx.fast.scaled_dot_product_attention
            mx.fast.scaled_dot_product_attention = scaled_dot_product_attention
            _settle_quantized(install=True)
            gradient_trace.install()
        _policy = _active[-1].policy
        return
    _settle_quantized(install=False)
    for name in gradient_trace.restore():
        warnings.warn(
            f"[unpatch_mx_fast] mx.{name} was replaced after patch_mx_fast; "
            "leaving the replacement in place",
            RuntimeWarning,
            stacklevel=4,
        )
    if mx.fast.scaled_dot_product_attention is scaled_dot_product_attention:
        mx.fast.scaled_dot_product_attention = _original
    else:
        # Someone replaced our function after patching; theirs may call ours
        # and stays, so it keeps working.
        warnings.warn(
            "[unpatch_mx_fast] mx.fast.scaled_dot_product_attention was replaced "
            "after patch_mx_fast; leaving the replacement in place",
            RuntimeWarning,
            stacklevel=4,
        )
    _installed = False
    _policy = "auto"


def patch_mx_fast(*, policy: str = "auto") -> MxFastPatch:
    """Route ``mx.fast.scaled_dot_product_attention`` through this package.

    Works as a plain call (patched until ``unpatch_mx_fast()`` or the
    returned handle's ``remove()``) and as a context manager (patched inside
    the ``with``)::

        with mlx_fused_attn.patch_mx_fast() as patch:
            text = mlx_lm.generate(model, tokenizer, prompt)
        print(patch.stats)  # PatchStats(fused=..., fallback=..., passed_through=...)

    While patched, ``mx.grad``, ``mx.value_and_grad`` and ``mx.vjp`` mark
    the functions they trace, so that calls inside a gradient function made
    under the patch route by their backward too (``route``'s training rules).

    Args:
        policy: ``"auto"``: ``route``'s lookup (this package where it is
            faster than mx.fast: the tuned table of ``tune``, else the shipped
            defaults, else the per-device rule); ``"fused"``: every call a
            fused kernel of this package covers.

    Returns:
        The patch's handle (``stats``, ``active``, ``remove()``).
    """
    if policy not in POLICIES:
        raise ValueError(
            f"[patch_mx_fast] policy must be one of {', '.join(map(repr, POLICIES))}; "
            f"got {policy!r}"
        )
    patch = MxFastPatch(policy)
    with _lock:
        _active.append(patch)
        _settle()
    return patch


def unpatch_mx_fast() -> bool:
    """Remove every active patch and give ``mx.fast`` its original function
    back. Returns False (and does nothing) where none was active."""
    with _lock:
        if not _active:
            return False
        for patch in _active:
            patch._end = PatchStats(*_counts)
        _active.clear()
        _settle()
        return True
