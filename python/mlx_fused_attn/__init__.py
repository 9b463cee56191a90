"""Fused scaled-dot-product attention for MLX.

``scaled_dot_product_attention`` is a drop-in for
``mlx.core.fast.scaled_dot_product_attention``: same arguments, same layout,
same mask semantics. Calls a fused kernel covers on the stream's device run
fused (never materialising the L_q x L_k scores); the rest run as plain MLX
ops, and ``can_use_fused`` says which and why.
"""

from __future__ import annotations

import warnings

from . import _build_info
from ._mlx_match import built_against, check_installed_mlx, explain_load_error

# Before anything loads a library: a mismatched MLX fails there with only an
# undefined symbol.
check_installed_mlx(_build_info)

import mlx.core as mx  # noqa: E402  (before the extension: shared types)

try:
    from . import _ext  # noqa: E402
except ImportError as error:
    raise explain_load_error(error, _build_info) from error

from .patching import MxFastPatch, PatchStats, patch_mx_fast, patch_stats, unpatch_mx_fast  # noqa: E402
from .plans import PlanHint, PlanSummary, plan_summary  # noqa: E402
from .routing import Route, route  # noqa: E402
from .tuning import tune  # noqa: E402
from .merge import merge_attention  # noqa: E402
from .varlen import pack_padded, unpack_padded, varlen_attention  # noqa: E402
from .ring import ring_attention, ring_deadline, ring_shard, ring_unshard  # noqa: E402

__all__ = [
    "FallbackWarning",
    "scaled_dot_product_attention",
    "can_use_fused",
    "quantized_scaled_dot_product_attention",
    "quantized_can_use_fused",
    "neighborhood_attention",
    "neighborhood_can_use_fused",
    "build_info",
    "kernel_status",
    "patch_mx_fast",
    "unpatch_mx_fast",
    "patch_stats",
    "route",
    "tune",
    "plan_summary",
    "merge_attention",
    "varlen_attention",
    "pack_padded",
    "unpack_padded",
    "ring_attention",
    "ring_deadline",
    "ring_shard",
    "ring_unshard",
    "MxFastPatch",
    "PatchStats",
    "PlanHint",
    "PlanSummary",
    "Route",
]
__version__ = "0.1.0"


def __dir__() -> list[str]:
    # The public names only: the module also holds its imports (mx,
    # warnings) and private helpers, which tab completion should not offer.
    return sorted(__all__ + ["__version__"])


class FallbackWarning(UserWarning):
    """A call ran as plain MLX ops instead of a fused kernel. Raised once per
    distinct reason, and only with MLX_FUSED_ATTN_WARN_FALLBACK=1."""


def _report_notices():
    """Raise the extension's notices as warnings where the user sees them:
    a kernel family that cannot be built or loaded (RuntimeWarning, always)
    and, when switched on, each distinct reason a call fell back. The
    extension queues each message once a process."""
    for kind, message in _ext.take_notices():
        category = FallbackWarning if kind == "fallback" else RuntimeWarning
        warnings.warn(message, category, stacklevel=3)


def build_info() -> dict:
    """The GPU backend of this build (``"metal"``, ``"cuda"`` or
    ``"none"``), whether its kernels were built ahead of time (``aot``), and
    whether they are compiled at run time now (``jit``:
    ``MLX_FUSED_ATTN_JIT=1``, or a build without AOT kernels); the running
    ``mlx_version`` and the MLX packages it was ``built_against``."""
    info = dict(_ext.build_info())
    info["mlx_version"] = mx.__version__
    info["built_against"] = built_against(_build_info)
    return info


def kernel_status() -> list[dict]:
    """Every kernel family on the CPU and on this build's GPU backend, each
    with its ``status``:

    - ``"loaded"``: one row per library or pipeline loaded (``what``);
    - ``"failed"``: likewise, with the ``reason`` its calls run unfused;
    - ``"not loaded yet"``: kernels load at the first call that needs them,
      and none has in this process;
    - ``"GPU only"``: a family the CPU has no kernel for (on the CPU the
      attention kernel takes its calls);
    - ``"not in this backend"``: a GPU family this build's backend does
      without (CUDA computes the backward's row dot in attention_backward).

    Each row has ``family``, ``device`` (``"CPU"``, the GPU's name once a
    kernel loaded there, else ``"GPU"``), ``what``, ``status`` and
    ``reason`` (empty but for ``"failed"``). A build without a GPU backend
    has CPU rows only."""
    families, cpu_families, gpu_families = _ext.kernel_families()
    checked = _ext.kernel_outcomes()
    rows = []

    def add(family, device, what, status, reason=""):
        rows.append(
            {"family": family, "device": device, "what": what, "status": status, "reason": reason}
        )

    devices = [("CPU", cpu_families, "GPU only")]
    if gpu_families:
        devices.append(("GPU", gpu_families, "not in this backend"))
    for family in families:
        for device, present, absent in devices:
            seen = [o for o in checked if o[0] == family and (o[1] == "CPU") == (device == "CPU")]
            for _, where, what, reason in seen:
                add(family, where, what, "failed" if reason else "loaded", reason)
            if not seen:
                add(family, device, "", "not loaded yet" if family in present else absent)
    return rows


def _scale_value(scale):
    """The scale as a float, converted as mx.fast's binding converts it:
    anything with ``__float__`` or ``__index__`` (Python and NumPy scalars,
    bool, a one-element mlx array), never a string."""
    if not isinstance(scale, (str, bytes, bytearray)):
        try:
            return float(scale)
        except (TypeError, ValueError):
            pass
    raise TypeError(
        "[scaled_dot_product_attention] scale must be a real number (a Python or "
        f"NumPy scalar, or a one-element mlx.core.array); got {scale!r}"
    )


def _check_types(q, k, v, scale, mask, sinks):
    """Raise TypeError where mx.fast's binding would; return the scale as a
    float."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, mx.array):
            raise TypeError(
                f"[scaled_dot_product_attention] {name} must be an mlx.core.array; "
                f"got {type(x).__name__}"
            )
    scale = _scale_value(scale)
    if mask is not None and not isinstance(mask, (str, mx.array)):
        raise TypeError(
            "[scaled_dot_product_attention] mask must be None, \"causal\" or an "
            f"mlx.core.array; got {type(mask).__name__}"
        )
    if sinks is not None and not isinstance(sinks, mx.array):
        raise TypeError(
            "[scaled_dot_product_attention] sinks must be None or an mlx.core.array; "
            f"got {type(sinks).__name__}"
        )
    return scale


def scaled_dot_product_attention(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    scale: float,
    mask: None | str | mx.array = None,
    sinks: mx.array | None = None,
    force_fused: bool = False,
    return_lse: bool = False,
    stream: None | mx.Stream | mx.Device = None,
) -> mx.array | tuple[mx.array, mx.array]:
    """Multi-head attention ``softmax(scale * q @ k.T + mask) @ v``, fused.

    Args:
        q: queries ``[B, H_q, L_q, D]``.
        k: keys ``[B, H_kv, L_k, D]``; ``H_q`` must be a multiple of ``H_kv``
            (grouped / multi-query attention without repeating k and v).
        v: values ``[B, H_kv, L_k, D_v]``.
        scale: multiplies ``q @ k.T`` (typically ``D ** -0.5``): a Python or
            NumPy scalar or a one-element array, as mx.fast takes it.
        mask: ``None``; ``"causal"`` (bottom-right aligned: the last query sees
            every key); a boolean array (True attends) or an additive array whose
            dtype (floating or integer) promotes to that of q, k, v, broadcastable to
            ``[B, H_q, L_q, L_k]``. Broadcast masks are read without a copy.
        sinks: optional ``[H_q]`` attention sinks: one extra logit per head
            that takes softmax mass but contributes no value.
        force_fused: raise ``ValueError`` with the reason instead of running
            the plain-ops fallback when no fused kernel covers the call; and
            when a gradient of the call is taken (``mx.grad``, ``mx.vjp``)
            where no fused backward covers it, instead of plain-op
            gradients. Forward-mode derivatives (``mx.jvp``) are plain ops
            either way.
        return_lse: also return the rows' log-sum-exp (see Returns).
        stream: stream or device to run on (default: the default stream).

    Returns:
        ``[B, H_q, L_q, D_v]`` in the promoted dtype of q, k, v. The softmax
        statistics and accumulation are float32 whatever the input dtype.
        With ``return_lse=True``, ``(out, lse)``: ``lse`` is float32
        ``[B, H_q, L_q]``, the natural log of each row's softmax
        denominator, ``log(sum_j exp(scale * q_i . k_j + mask_ij))`` plus
        the sink's ``exp(sinks[h])`` where there are sinks; ``-inf`` for a
        row that sees no key. Both are differentiable: the gradient of
        ``lse`` reaches q, k, the sinks and an additive mask, through the
        fused kernels (an extra forward and backward run in the backward of
        a call that returns it). ``merge_attention`` combines such pairs.
    """
    if not isinstance(return_lse, bool):
        raise TypeError(
            f"[scaled_dot_product_attention] return_lse must be a bool; got {return_lse!r}"
        )
    if return_lse:
        scale = _check_types(q, k, v, scale, mask, sinks)
        try:
            return _ext.scaled_dot_product_attention_with_lse(
                q, k, v, scale=scale, mask=mask, sinks=sinks,
                force_fused=bool(force_fused), stream=stream,
            )
        finally:
            _report_notices()
    return _attention(
        q, k, v, scale=scale, mask=mask, sinks=sinks, force_fused=force_fused, stream=stream
    )


def _attention(q, k, v, *, scale, mask=None, sinks=None, force_fused=False, stream=None,
               hint: PlanHint = PlanHint()):  # fmt: skip
    """``scaled_dot_product_attention`` with a plan hint: the tuned table's
    choice among the plans of the call (``route``, ``tune``). A call that
    returns the LSE takes none: its plan never runs the short kernel, and
    splits keys only where the kernel's last split merges them (CUDA)."""
    scale = _check_types(q, k, v, scale, mask, sinks)
    return _fused_call(q, k, v, scale, mask, sinks, bool(force_fused), stream, hint)


def _fused_call(q, k, v, scale: float, mask, sinks, force_fused: bool, stream, hint: PlanHint):
    """The extension's op on arguments that ``_check_types`` accepts, the
    scale a float already (the patched mx.fast's route has checked them)."""
    try:
        return _ext.scaled_dot_product_attention(
            q, k, v, scale=scale, mask=mask, sinks=sinks, force_fused=force_fused,
            stream=stream, short_kernel=hint.short_kernel,
            max_key_splits=hint.max_key_splits, metal_variant=hint.metal_variant,
        )
    finally:
        _report_notices()


def can_use_fused(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    scale: float,
    mask: None | str | mx.array = None,
    sinks: mx.array | None = None,
    stream: None | mx.Stream | mx.Device = None,
) -> tuple[bool, str]:
    """Whether ``scaled_dot_product_attention`` with these arguments runs a
    fused kernel, and if not, why (the reason ``force_fused=True`` raises).

    Invalid arguments raise exactly as ``scaled_dot_product_attention`` does.
    """
    scale = _check_types(q, k, v, scale, mask, sinks)
    try:
        return _ext.can_use_fused(
            q, k, v, scale=scale, mask=mask, sinks=sinks, stream=stream
        )
    finally:
        _report_notices()


_QOP = "[quantized_scaled_dot_product_attention]"


def _quantized_operand(x, name):
    """``q_keys`` or ``q_values`` as the (codes, scales, biases) tuple
    mx.quantize's affine mode returns."""
    if not isinstance(x, (tuple, list)) or not all(isinstance(a, mx.array) for a in x):
        raise TypeError(
            f"{_QOP} {name} must be the tuple (packed codes, scales, biases) of "
            f"mlx.core.array that mx.quantize returns; got {type(x).__name__}"
        )
    if len(x) == 2:
        raise ValueError(
            f"{_QOP} {name} has 2 arrays (codes, scales): mx.quantize's mxfp4, nvfp4 "
            "and mxfp8 modes are not supported, only its affine mode (codes, scales, "
            "biases), which mlx-lm's QuantizedKVCache uses"
        )
    if len(x) != 3:
        raise ValueError(
            f"{_QOP} {name} must have 3 arrays (packed codes, scales, biases); got {len(x)}"
        )
    return tuple(x)


def _check_quantized_types(queries, q_keys, q_values, scale, mask, group_size, bits, sinks):
    """Raise TypeError for arguments of the wrong kind; return them as the
    extension takes them."""
    if not isinstance(queries, mx.array):
        raise TypeError(
            f"{_QOP} queries must be an mlx.core.array; got {type(queries).__name__}"
        )
    keys = _quantized_operand(q_keys, "q_keys")
    values = _quantized_operand(q_values, "q_values")
    for name, x in (("group_size", group_size), ("bits", bits)):
        if isinstance(x, bool) or not isinstance(x, int):
            raise TypeError(f"{_QOP} {name} must be an int; got {x!r}")
    if mask is not None and not isinstance(mask, (str, mx.array)):
        raise TypeError(
            f"{_QOP} mask must be None, \"causal\" or an mlx.core.array; "
            f"got {type(mask).__name__}"
        )
    if sinks is not None and not isinstance(sinks, mx.array):
        raise TypeError(
            f"{_QOP} sinks must be None or an mlx.core.array; got {type(sinks).__name__}"
        )
    try:
        scale = _scale_value(scale)
    except TypeError:
        raise TypeError(f"{_QOP} scale must be a real number; got {scale!r}") from None
    return keys, values, scale


def quantized_scaled_dot_product_attention(
    queries: mx.array,
    q_keys: tuple[mx.array, mx.array, mx.array],
    q_values: tuple[mx.array, mx.array, mx.array],
    scale: float,
    mask: None | str | mx.array = None,
    group_size: int = 64,
    bits: int = 8,
    *,
    sinks: mx.array | None = None,
    force_fused: bool = False,
    stream: None | mx.Stream | mx.Device = None,
) -> mx.array:
    """Attention over a quantized K/V cache, fused: mlx-lm's
    ``quantized_scaled_dot_product_attention`` (``mlx_lm.models.base``),
    with its arguments and results, that dequantizes K and V block by block
    as it reads them instead of building the ``L_q x L_k`` scores.

    Args:
        queries: ``[B, H_q, L_q, D]``.
        q_keys: keys as ``mx.quantize(k, group_size, bits)`` returns them in its
            affine mode: ``(codes, scales, biases)`` with codes uint32
            ``[B, H_kv, L_k, D * bits / 32]`` and scales and biases
            ``[B, H_kv, L_k, D / group_size]`` (mlx-lm's ``QuantizedKVCache``
            holds them so). ``H_q`` must be a multiple of ``H_kv``.
        q_values: values, the same way (``D_v`` values a row).
        scale: multiplies ``queries @ keys.T``.
        mask: ``None``; ``"causal"`` (bottom-right aligned); a boolean array
            (True attends) or an additive array, broadcastable to
            ``[B, H_q, L_q, L_k]``.
        group_size: 32, 64 or 128, as the cache was quantized.
        bits: 2, 3, 4, 5, 6 or 8, as the cache was quantized. mx.quantize's
            ``mxfp4``, ``nvfp4`` and ``mxfp8`` modes are not taken.
        sinks: optional ``[H_q]`` attention sinks (mlx-lm's own function
            refuses them).
        force_fused: raise ``ValueError`` with the reason instead of running
            the plain-ops fallback (dequantize, then attend).
        stream: stream or device to run on.

    Returns:
        ``[B, H_q, L_q, D_v]`` in the promoted dtype of the queries, scales
        and biases; float32 softmax statistics and accumulation.

    Inference only: the cache holds no gradients, and ``mx.grad``,
    ``mx.vjp`` or ``mx.jvp`` through this function raise ``ValueError``.
    """
    keys, values, scale = _check_quantized_types(
        queries, q_keys, q_values, scale, mask, group_size, bits, sinks
    )
    try:
        return _ext.quantized_scaled_dot_product_attention(
            queries, keys, values, scale, mask, group_size, bits,
            sinks=sinks, force_fused=bool(force_fused), stream=stream,
        )
    finally:
        _report_notices()


def quantized_can_use_fused(
    queries: mx.array,
    q_keys: tuple[mx.array, mx.array, mx.array],
    q_values: tuple[mx.array, mx.array, mx.array],
    scale: float,
    mask: None | str | mx.array = None,
    group_size: int = 64,
    bits: int = 8,
    *,
    sinks: mx.array | None = None,
    stream: None | mx.Stream | mx.Device = None,
) -> tuple[bool, str]:
    """Whether ``quantized_scaled_dot_product_attention`` with these
    arguments runs a fused kernel, and if not, why (the reason
    ``force_fused=True`` raises). Invalid arguments raise as the op does."""
    keys, values, scale = _check_quantized_types(
        queries, q_keys, q_values, scale, mask, group_size, bits, sinks
    )
    try:
        return _ext.quantized_can_use_fused(
            queries, keys, values, scale, mask, group_size, bits, sinks=sinks, stream=stream
        )
    finally:
        _report_notices()


def _per_axis(value, name, kind):
    values = list(value) if isinstance(value, (tuple, list)) else [value]
    if not values or not all(isinstance(x, kind) for x in values) or (
        kind is int and any(isinstance(x, bool) for x in values)
    ):
        raise TypeError(
            f"[neighborhood_attention] {name} must be a {kind.__name__} or a tuple of "
            f"{kind.__name__} (one per spatial axis); got {value!r}"
        )
    return values


def _na_args(q, k, v, kernel_size, dilation, is_causal, scale):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, mx.array):
            raise TypeError(
                f"[neighborhood_attention] {name} must be an mlx.core.array; got {type(x).__name__}"
            )
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"[neighborhood_attention] scale must be None or a float; got {scale!r}")
    return (
        _per_axis(kernel_size, "kernel_size", int),
        _per_axis(dilation, "dilation", int),
        _per_axis(is_causal, "is_causal", bool),
        None if scale is None else float(scale),
    )


def neighborhood_attention(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    kernel_size: int | tuple[int, ...],
    *,
    dilation: int | tuple[int, ...] = 1,
    is_causal: bool | tuple[bool, ...] = False,
    scale: float | None = None,
    stream: None | mx.Stream | mx.Device = None,
) -> mx.array:
    """Neighborhood attention with NATTEN's na1d / na2d / na3d semantics.

    Each token attends only to a window of tokens around it. Per spatial axis
    of length n with kernel size k and dilation d, positions split into d
    interleaved groups (i mod d); in a group of length m the query at group
    index j sees the k group positions starting at clamp(j - k // 2, 0, m - k)
    (windows shift inward at the borders, so every query sees k keys per
    axis); with ``is_causal`` on an axis, positions max(0, j - k + 1) .. j.
    The neighborhood is the product over the axes.

    Args:
        q, k: ``[B, *spatial, H, D]`` with 1, 2 or 3 spatial axes (heads last).
        v: ``[B, *spatial, H, D_v]``.
        kernel_size: one int for every axis or one per axis; 1 <= k <= the
            shortest dilation group of the axis (n // d).
        dilation: one int >= 1 for every axis or one per axis.
        is_causal: one bool for every axis or one per axis.
        scale: multiplies q k^T; default ``D ** -0.5``.
        stream: stream or device (default: the default stream).

    Returns:
        ``[B, *spatial, H, D_v]``. Gradients are exact (taken through the
        plain-ops definition); calls no fused kernel covers run as plain MLX
        ops with an explicit neighborhood mask (see
        ``neighborhood_can_use_fused``).
    """
    ks, ds, cs, sc = _na_args(q, k, v, kernel_size, dilation, is_causal, scale)
    try:
        return _ext.neighborhood_attention(
            q, k, v, ks, dilation=ds, is_causal=cs, scale=sc, stream=stream
        )
    finally:
        _report_notices()


def neighborhood_can_use_fused(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    kernel_size: int | tuple[int, ...],
    *,
    dilation: int | tuple[int, ...] = 1,
    is_causal: bool | tuple[bool, ...] = False,
    scale: float | None = None,
    stream: None | mx.Stream | mx.Device = None,
) -> tuple[bool, str]:
    """Whether ``neighborhood_attention`` with these arguments runs a fused
    kernel, and if not, why. Invalid arguments raise as the op does."""
    ks, ds, cs, sc = _na_args(q, k, v, kernel_size, dilation, is_causal, scale)
    try:
        return _ext.neighborhood_can_use_fused(
            q, k, v, ks, dilation=ds, is_causal=cs, scale=sc, stream=stream
        )
    finally:
        _report_notices()
