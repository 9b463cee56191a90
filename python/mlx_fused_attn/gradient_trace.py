"""Whether this thread is running a function that a gradient transform
(``mx.grad``, ``mx.value_and_grad``, ``mx.vjp``) traces: ``route`` reads it
to route training calls by their backward too.

MLX keeps that state in C++ (``detail::in_grad_tracing()``, a thread-local
that libmlx does not export), so Python cannot read it. ``patch_mx_fast``
therefore replaces the three transforms on ``mlx.core`` with ``grad``,
``value_and_grad`` and ``vjp`` below, which hand MLX the user's function
wrapped so that it runs with this module's thread-local counter raised (a
counter: transforms nest, as ``mx.grad(mx.grad(f))`` does). Only the
function passed in runs marked, never the transform's own work, so a call
made while MLX evaluates the gradient is not counted.

A function a transform made before the patch (``step =
mx.value_and_grad(loss)`` at import, then ``patch_mx_fast()``) is not
marked: make it inside the patch. ``mlx.nn.value_and_grad`` looks
``mx.value_and_grad`` up when it is called, so one made inside the patch
is marked.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import mlx.core as mx

# The transforms on mlx.core the patch replaces, by attribute name.
TRANSFORMS = ("grad", "value_and_grad", "vjp")

_state = threading.local()
# Marked functions running in any thread: while none runs, active() needs no
# thread-local read (0.7 us of a patched call's host time, 2026-12-06).
_running = 0
_running_lock = threading.Lock()
# What mlx.core held for each transform when ours went in (kept after
# unpatching, as patching keeps mx.fast's: a function made through ours
# runs on).
_originals: dict[str, Callable] = {}


def active() -> bool:
    """Whether this thread is inside a function a patched transform traces."""
    return _running > 0 and getattr(_state, "depth", 0) > 0


def _marked(fun: Callable) -> Callable:
    """``fun``, run with this thread's counter raised."""

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        global _running
        with _running_lock:
            _running += 1
        _state.depth = getattr(_state, "depth", 0) + 1
        try:
            return fun(*args, **kwargs)
        finally:
            _state.depth -= 1
            with _running_lock:
                _running -= 1

    return traced


def _transform(name: str, fun, args, kwargs):
    # A non-callable goes to MLX as it is, which raises its own error.
    return _originals[name](_marked(fun) if callable(fun) else fun, *args, **kwargs)


def grad(fun, *args, **kwargs):
    """``mx.grad`` as ``patch_mx_fast`` installs it: MLX's, with ``fun``
    traced marked (module docstring)."""
    return _transform("grad", fun, args, kwargs)


def value_and_grad(fun, *args, **kwargs):
    """``mx.value_and_grad`` as ``patch_mx_fast`` installs it: MLX's, with
    ``fun`` traced marked (module docstring)."""
    return _transform("value_and_grad", fun, args, kwargs)


def vjp(fun, *args, **kwargs):
    """``mx.vjp`` as ``patch_mx_fast`` installs it: MLX's, with ``fun``
    traced marked (module docstring)."""
    return _transform("vjp", fun, args, kwargs)


_OURS = {"grad": grad, "value_and_grad": value_and_grad, "vjp": vjp}


def install() -> None:
    """Put our transforms on mlx.core (patching's lock held)."""
    for name in TRANSFORMS:
        current = getattr(mx, name)
        if current is not _OURS[name]:
            _originals[name] = current
            setattr(mx, name, _OURS[name])


def restore() -> list[str]:
    """Give mlx.core its transforms back (patching's lock held); returns the
    names of those replaced after the patch, which stay (someone else's
    function may call ours)."""
    replaced = []
    for name in TRANSFORMS:
        if name not in _originals:
            continue
        if getattr(mx, name) is _OURS[name]:
            setattr(mx, name, _originals[name])
        else:
            replaced.append(name)
    return replaced
