"""Which attention a call through the patched ``mx.fast`` runs: this
package's fused kernel or MLX's own, decided per device from measurements.

``route(...)`` returns a ``Route``: ``(choice, reason)`` as a tuple, with
the ``source`` of the decision and the plan ``hint`` the call runs with.
The choice is one of

- ``"fused"``: this package's fused kernel runs the call;
- ``"fallback"``: no fused kernel of this package covers the call (or the
  package does not accept its arguments), so ``mx.fast`` runs it;
- ``"passthrough"``: on this device ``mx.fast`` is the faster choice for
  the call, so ``mx.fast`` runs it (where the shapes alone decide that,
  whether a kernel of this package covers the call is not checked).

The decision is a lookup of the call's shape class (``shape_class.py``),
the first of these sources that has one:

1. ``"tuned"``: the tuned table of this device (``tune``, ``python -m
   mlx_fused_attn.tune``; ``tuned_table.py``), whose winner may also be one
   of the fused kernel's plans (a ``PlanHint``);
2. ``"defaults"``: the shipped measurements of this device's backend
   (``routing_defaults.json``), the running device's own first;
3. ``"rule"``: the per-device rules below, written from those
   measurements for the classes none of them covers.

A call no kernel covers gets ``"fallback"`` from the plan (source
``"coverage"``); ``policy="fused"`` sends every covered call here (source
``"policy"``).

The rules, one per device, rest on the numbers in ``routing_defaults.json``
(and in ``benchmarks/RESULTS.md``):

- CPU: always ours. MLX's CPU attention is unfused (matmul, softmax,
  matmul through a slow CPU sgemm): 35x slower for prefill, 5.5x for
  float16 decoding; float32 decoding is a tie (1.03x), so no call loses.
- CUDA: ours where the short-sequence kernel takes the call (``L_q`` and
  ``L_k`` at most 64: 1.1x-6.5x mx.fast), and for float16/bfloat16
  decoding (``L_q <= 8``) at cuDNN's head dims, where both split the keys
  over the GPU (1.03x-1.86x mx.fast), and for few queries against a long
  cache (``L_k >= 32 L_q``: chunked prefill, speculative verification) in a
  grid under one wave, where ours splits the keys and cuDNN does not
  (1.62x-4.64x). Everything else goes to mx.fast:
  cuDNN is as fast or faster for float16/bfloat16 prefill from L = 512
  (ours 0.66x-1.00x its speed), and for float32 the one measurement of the
  general kernel (an older kernel) lost to mx.fast's unfused TF32 path from
  L = 512. Except array masks: ours for bool masks at every head dim
  (mx.fast's bool-mask calls timed as its plain ops do: 3.9x-13.9x ours)
  and for additive ones at D = 64, where they were measured (1.12x-3.07x).
- Metal: ours where a fused kernel covers the call, ``L_q >= 32`` and the
  head dims are at most 128; mx.fast below 32 queries, where its vector
  kernel serves ``L_q <= 8`` (decoding), and past head dim 128. On GPUs
  with neural accelerators, which MLX runs mx.fast on (its "nax" kernels:
  M5 class), mx.fast for every call.
  **Nothing has been measured on Apple hardware yet**: 32 is where a query
  block of our kernel is full, not a measured crossover, and the head-dim
  and neural-accelerator rules keep mx.fast wherever ours is least likely
  to win until a measurement says otherwise (``metal_verdict``).

Training. A call traced for a gradient (``gradient_trace.py``: inside a
function that ``mx.grad``, ``mx.value_and_grad`` or ``mx.vjp`` made under
``patch_mx_fast``; ``route(..., training=True)`` says so directly) runs the
chosen op's backward too, so forward measurements (the shipped defaults, a
tuned forward class) never decide it. A tuned class of training steps
(``tune`` with training calls: ``--train-lengths``, ``train=1``) does; where
none is tuned, the training rules do:

- CUDA: mx.fast where MLX 0.32.4 runs its gradient through cuDNN's fused
  backward (``_cudnn_gradient``), which ours trails (forward and backward
  on an H100/H200: ours 1.31x-1.63x cuDNN's time). Ours elsewhere, where
  mx.fast's gradient is that of its plain-ops definition, with the whole
  score matrix (``ScaledDotProductAttentionVJP::use_fallback`` in MLX's
  ``backend/cuda/scaled_dot_product_attention.cpp``), or starts from a bool
  mask mx.fast makes additive at the size of the scores; except float32
  past the short kernel's lengths, which keeps mx.fast as in inference
  (its plain ops run on TF32 matrix units; unmeasured in training).
- CPU and Metal: ours. MLX 0.32.4 has no fused attention backward on either
  (the CPU runs mx.fast as plain ops; Metal's ``ScaledDotProductAttentionVJP``
  always falls back to them, and its kernel headers hold no attention
  backward).

``policy="fused"`` skips the device rule: every call a fused kernel covers
runs fused (for the memory a fused kernel saves, for float32 accuracy on
CUDA, where mx.fast multiplies in TF32, or to test the kernels inside a
model).
"""

from __future__ import annotations

from functools import cache

import mlx.core as mx

import mlx_fused_attn as _package  # this module loads while the package does

from . import _ext, gradient_trace, plans, routing_defaults, tuned_table
from .candidates import MX_FAST, Candidate
from .shape_class import shape_class

FUSED = "fused"
FALLBACK = "fallback"
PASSTHROUGH = "passthrough"
POLICIES = ("auto", "fused")
# Where a decision came from (Route.source).
TUNED = "tuned"
DEFAULTS = "defaults"
RULE = "rule"
COVERAGE = "coverage"
POLICY = "policy"

# Metal: the smallest L_q routed to our kernel (see the module docstring:
# a full query block, not a measurement).
METAL_MIN_QUERIES = 32
# Metal: the largest head dim (q, k or v) routed to our kernel. MLX's own
# fused kernels stop at 128 too; past it neither side has been measured.
METAL_MAX_HEAD_DIM = 128
# MLX 0.32.4 runs mx.fast on an Apple GPU's neural accelerators where
# metal::is_nax_available() (device.cpp; not exported from libmlx) says so:
# macOS 26.2 or later, and an architecture generation (Device::
# get_architecture_gen(), the two digits before the architecture string's
# last letter) of at least 17, or 18 for a phone-class ('p') GPU.
NAX_MIN_GENERATION = 17
NAX_MIN_GENERATION_PHONE = 18
# CUDA: calls with at most this many queries are decoding steps, whose few
# query blocks both mx.fast and ours split over the keys.
CUDA_DECODE_MAX_QUERIES = 8
# cuDNN's largest head dim: past it (or with D_v != D) mx.fast runs plain MLX
# ops on CUDA, materialising the scores.
CUDNN_MAX_HEAD_DIM = 128
# CUDA: cuDNN's head dims are multiples of this.
CUDNN_HEAD_DIM_MULTIPLE = 8
# CUDA: MLX runs mx.fast's gradient through cuDNN only where L_q is a
# multiple of this (cuDNN's tile; elsewhere MLX would pad, and it runs the
# plain-ops gradient instead).
CUDNN_BACKWARD_QUERY_TILE = 128
# CUDA: the head dim at which additive array masks were measured faster in
# ours than in mx.fast (bool masks are ours at every head dim: mx.fast's
# timed as plain MLX ops do).
CUDA_ADDITIVE_MASK_HEAD_DIM = 64
# The short-sequence kernel's longest L_q and L_k (README, "Short sequences").
SHORT_MAX_LENGTH = 64
# CUDA: the general kernel's smallest query block, and a wave of its blocks
# on the largest GPU it runs on (3 blocks a multiprocessor, 192
# multiprocessors): a bound on the grids whose keys the plan may split.
CUDA_SMALLEST_QUERY_BLOCK = 64
CUDA_LARGEST_WAVE = 3 * 192
# CUDA: the fewest keys a query at which ours, splitting the keys of a grid
# under one wave, was measured faster than cuDNN (1.62x-4.64x from 32 on;
# 0.56x at one key a query, where cuDNN's own blocks fill the GPU).
CUDA_SPLIT_KEYS_PER_QUERY = 32


class Route(tuple):
    """``(choice, reason)``, as ``route`` has always returned it, with the
    decision's ``source`` (TUNED, DEFAULTS, RULE, COVERAGE or POLICY) and
    the ``hint`` the fused kernel runs the call with."""

    def __new__(cls, choice: str, reason: str, source: str,
                hint: plans.PlanHint = plans.PlanHint()):  # fmt: skip
        route = super().__new__(cls, (choice, reason))
        route.source = source
        route.hint = hint
        return route

    @property
    def choice(self) -> str:
        return self[0]

    @property
    def reason(self) -> str:
        return self[1]

    def __repr__(self) -> str:
        return (
            f"Route(choice={self[0]!r}, reason={self[1]!r}, source={self.source!r}, "
            f"hint={self.hint!r})"
        )


@cache
def _gpu_backend() -> str:
    return _package.build_info()["gpu_backend"]


def _device(stream) -> mx.Device:
    """The device a call with this ``stream`` argument runs on (a Stream, a
    Device, a DeviceType such as ``mx.cpu``, or None)."""
    if stream is None:
        return mx.default_device()
    if isinstance(stream, mx.Stream):
        return stream.device
    if isinstance(stream, mx.DeviceType):
        return mx.Device(stream)
    if isinstance(stream, mx.Device):
        return stream
    return mx.default_device()


def _past_cudnn(q: mx.array, v: mx.array) -> bool:
    """Head dims cuDNN does not take: mx.fast runs plain MLX ops for them."""
    return q.shape[3] > CUDNN_MAX_HEAD_DIM or v.shape[3] != q.shape[3]


def _cuda_mask_wins(q: mx.array, mask) -> bool:
    """An array mask with which ours was measured faster than mx.fast."""
    if not isinstance(mask, mx.array):
        return False
    return mask.dtype == mx.bool_ or q.shape[3] == CUDA_ADDITIVE_MASK_HEAD_DIM


_CUDNN_PREFILL_REASON = (
    f"CUDA: cuDNN (mx.fast) is as fast or faster for float16/bfloat16 past {SHORT_MAX_LENGTH} "
    "tokens where our grid fills the GPU without split keys (ours 0.66x-1.00x its "
    "speed on an H200: B=1 H=32 L=4096 D=128 bf16 459 us against 411 us)"
)


def _long_cache(q: mx.array, k: mx.array) -> bool:
    """Queries against a cache of at least CUDA_SPLIT_KEYS_PER_QUERY keys a
    query (chunked prefill, speculative verification) in a grid of query
    blocks that may be under one wave on some GPU, where ours splits the keys
    (its plan's code is KEYS_SPLIT); checked only then, so that other calls
    skip the check."""
    batch, heads, queries = q.shape[0], q.shape[1], q.shape[2]
    query_blocks = batch * heads * -(-queries // CUDA_SMALLEST_QUERY_BLOCK)
    return query_blocks < CUDA_LARGEST_WAVE and k.shape[2] >= CUDA_SPLIT_KEYS_PER_QUERY * queries


def _cuda_by_shape(q: mx.array, k: mx.array, v: mx.array, mask) -> tuple[str, str] | None:
    """mx.fast's verdict for calls past the short-sequence kernel's lengths,
    from the shapes alone (and the mask's kind); None where the kernel
    decides."""
    if max(q.shape[2], k.shape[2]) <= SHORT_MAX_LENGTH:
        return None
    if q.shape[2] <= CUDA_DECODE_MAX_QUERIES:
        if q.dtype != mx.float32 and not _past_cudnn(q, v):
            return None
        return PASSTHROUGH, (
            f"CUDA: decoding (L_q <= {CUDA_DECODE_MAX_QUERIES}) in float32 or "
            f"past head dim {CUDNN_MAX_HEAD_DIM} was not measured against mx.fast's "
            'kernel; policy="fused" runs ours'
        )
    if q.dtype == mx.float32:
        return PASSTHROUGH, (
            f"CUDA: float32 past {SHORT_MAX_LENGTH} tokens was faster in mx.fast's "
            "unfused TF32 path (B=1 H=32 L=1024 D=128: 218 us against 577 us, "
            'older kernel); policy="fused" keeps float32 accuracy and memory'
        )
    if _past_cudnn(q, v) or _cuda_mask_wins(q, mask) or _long_cache(q, k):
        return None
    return PASSTHROUGH, _CUDNN_PREFILL_REASON


def _cudnn_gradient(q: mx.array, k: mx.array, v: mx.array, mask) -> bool:
    """Whether MLX 0.32.4 runs both halves of mx.fast's gradient in cuDNN:
    its forward (``supports_sdpa_cudnn``: float16/bfloat16, head dims
    multiples of 8 up to 128, a causal mask only where L_q <= L_k) and its
    backward (``ScaledDotProductAttentionVJP::use_fallback``: L_q a multiple
    of 128). A bool mask is left out: mx.fast turns it into an additive one
    the size of the whole score matrix ([B, H_q, L_q, L_k]) before cuDNN
    sees it, which timed as plain MLX ops do (CUDA rules above)."""
    if q.dtype not in (mx.float16, mx.bfloat16) or _past_cudnn(q, v):
        return False
    if q.shape[3] % CUDNN_HEAD_DIM_MULTIPLE or q.shape[2] % CUDNN_BACKWARD_QUERY_TILE:
        return False
    if isinstance(mask, mx.array):
        return mask.dtype != mx.bool_
    return not (mask == "causal" and q.shape[2] > k.shape[2])


_CUDNN_TRAINING_REASON = (
    "CUDA, training: mx.fast's gradient is cuDNN's fused backward here, and ours "
    "trails it (forward and backward, H100/H200, 2026-12-05: B=1 H=32 L=4096 "
    "D=128 bf16 1236 us against 1842 us, causal 772 against 1011; D=64 L=1024 "
    '67 against 109); policy="fused" runs ours'
)


def _cuda_training_by_shape(q: mx.array, k: mx.array, v: mx.array, mask) -> tuple[str, str] | None:
    """mx.fast's verdict for a training call on CUDA from the shapes alone;
    None where ours takes it if a kernel covers it."""
    if not all(isinstance(x, mx.array) and x.ndim == 4 for x in (q, k, v)):
        return None
    if _cudnn_gradient(q, k, v, mask):
        return PASSTHROUGH, _CUDNN_TRAINING_REASON
    if q.dtype == mx.float32 and max(q.shape[2], k.shape[2]) > SHORT_MAX_LENGTH:
        return PASSTHROUGH, (
            f"CUDA, training: float32 past {SHORT_MAX_LENGTH} tokens stays with mx.fast, "
            "whose forward and gradient are plain ops on TF32 matrix units (its forward: "
            "B=1 H=32 L=1024 D=128 218 us against ours 577 us, older kernel; the "
            'gradient unmeasured); policy="fused" keeps float32 accuracy and memory'
        )
    return None


def _training_reason(device: mx.Device) -> str:
    """Why ours runs a training call a kernel covers (where mx.fast's
    gradient is not cuDNN's)."""
    if device.type == mx.DeviceType.cpu:
        return (
            "CPU, training: MLX runs mx.fast and its gradient as plain ops on the "
            "CPU; ours runs fused both ways"
        )
    if _gpu_backend() == "cuda":
        return (
            "CUDA, training: mx.fast's gradient here is that of its plain-ops "
            "definition, with the whole score matrix (cuDNN's backward needs "
            f"float16/bfloat16, L_q a multiple of {CUDNN_BACKWARD_QUERY_TILE} and head "
            f"dims up to {CUDNN_MAX_HEAD_DIM}), or starts from a bool mask made additive "
            "at the size of the scores"
        )
    return (
        "Metal, training: MLX 0.32.4 has no fused attention backward on Metal, so "
        "mx.fast's gradient is that of its plain-ops definition (unmeasured on "
        "Apple hardware)"
    )


def _cuda_by_kernel(
    q: mx.array, k: mx.array, v: mx.array, mask, plan: plans.PlanSummary
) -> tuple[str, str]:
    if plan.code == plans.SHORT_KERNEL:
        return FUSED, (
            "CUDA: the short-sequence kernel takes it (1.12x-6.5x mx.fast on "
            "an H200: B=1000 H=80 L=32 D=64 fp16 339 us against 1277 us)"
        )
    if _past_cudnn(q, v):
        return FUSED, (
            f"CUDA: past head dim {CUDNN_MAX_HEAD_DIM} (or with D_v != D) mx.fast has "
            "no fused kernel and runs plain MLX ops (H200, B=1 H=32 L=4096 D=256 "
            "bf16: 1275 us against 1811 us)"
        )
    if q.shape[2] <= CUDA_DECODE_MAX_QUERIES:
        return FUSED, (
            "CUDA: decoding splits the keys over the GPU (H200, 32/8 heads, "
            "D=128 bf16: B=1 L_k=32768 43 us against 45 us, L_k=4096 13 against "
            "17; B=8 L_k=32768 248 against 307)"
        )
    if _long_cache(q, k) and not _cuda_mask_wins(q, mask):
        if plan.code == plans.KEYS_SPLIT:
            return FUSED, (
                f"CUDA: few queries against a long cache, whose keys ours splits "
                f"({plan.message}) and cuDNN does not (H200, 32/8 heads, D=128 bf16 "
                "causal: L_q=128 L_k=32768 164 us against 394 us, L_q=16 L_k=4096 "
                "18 against 53)"
            )
        return PASSTHROUGH, _CUDNN_PREFILL_REASON
    if max(q.shape[2], k.shape[2]) > SHORT_MAX_LENGTH and _cuda_mask_wins(q, mask):
        if mask.dtype == mx.bool_:
            return FUSED, (
                "CUDA: mx.fast's bool masks time as plain MLX ops do (H200, B=1 H=32 "
                "L=2048 D=64 fp16, random [1,1,L,L]: 129 us against 635 us; "
                "mlx-lm's causal mask 76 against 630)"
            )
        return FUSED, (
            f"CUDA: additive masks at D={CUDA_ADDITIVE_MASK_HEAD_DIM} (H200, B=1 "
            "H=32 L=2048 fp16: [1,1,L,L] 129 us against 144 us, ALiBi [1,32,L,L] "
            "141 against 161)"
        )
    return PASSTHROUGH, (
        "CUDA: short sequences the short-sequence kernel does not take went "
        "faster in mx.fast (general kernel, B=1 H=32 L=32 D=64 fp16: 4.7 us "
        "against 8.3 us, older kernel)"
    )


def has_neural_accelerators(architecture: str) -> bool:
    """Whether an Apple GPU is of the class whose neural accelerators MLX
    0.32.4 runs mx.fast on (its "nax" kernels; M5 class): ``architecture``
    as ``mx.device_info(mx.gpu)`` gives it (MLX's
    ``Device::get_architecture()``, e.g. ``"applegpu_g16s"``), read as
    MLX's ``metal::is_nax_available`` reads it. That rule's other half,
    macOS 26.2 or later, is left out: a Python built with an older SDK can
    see macOS 26 as 16.0 (Apple's compatibility version), and keeping
    mx.fast on such a GPU under an older macOS gives up nothing measured."""
    gen = architecture[-3:-1]
    if not architecture.startswith("applegpu_") or not gen.isdigit():
        return False
    needed = NAX_MIN_GENERATION_PHONE if architecture.endswith("p") else NAX_MIN_GENERATION
    return int(gen) >= needed


def metal_verdict(architecture: str, head_dim: int, head_dim_v: int) -> tuple[str, str] | None:
    """mx.fast's verdict for a call on an Apple GPU (``architecture`` as
    ``has_neural_accelerators`` takes it) from the GPU and the head dims
    alone, where ours has not been measured against it; None where the
    other rules decide."""
    if has_neural_accelerators(architecture):
        return PASSTHROUGH, (
            f"Metal: {architecture} has neural accelerators, which MLX runs "
            "mx.fast on (M5 class), and ours has not been measured against that "
            'on Apple hardware; policy="fused" runs ours'
        )
    if max(head_dim, head_dim_v) > METAL_MAX_HEAD_DIM:
        return PASSTHROUGH, (
            f"Metal: head dims past {METAL_MAX_HEAD_DIM} ({head_dim}, v {head_dim_v}) "
            'have not been measured on Apple hardware; policy="fused" runs ours'
        )
    return None


@cache
def _gpu_architecture() -> str:
    """This process's GPU as MLX names it."""
    return str(mx.device_info(mx.gpu)["architecture"])


def _metal_by_shape(q: mx.array, v: mx.array) -> tuple[str, str] | None:
    if q.shape[2] < METAL_MIN_QUERIES:
        return PASSTHROUGH, (
            f"Metal: L_q < {METAL_MIN_QUERIES} stays with mx.fast, whose vector "
            "kernel serves decoding (unmeasured on Apple hardware)"
        )
    return metal_verdict(_gpu_architecture(), q.shape[3], v.shape[3])


def _by_shape(q, k, v, mask) -> tuple[str, str] | None:
    """A GPU rule's verdict where the shapes alone decide for mx.fast: such
    calls skip the coverage check (a validation of every argument), which
    matters for decoding, one call a layer a token."""
    arrays = (q, k, v)
    if not all(isinstance(x, mx.array) and x.ndim == 4 for x in arrays):
        return None
    backend = _gpu_backend()
    if backend == "cuda":
        return _cuda_by_shape(q, k, v, mask)
    if backend == "metal":
        return _metal_by_shape(q, v)
    return None


def _measured(
    q, k, v, mask, sinks, device: mx.Device, training: bool
) -> tuple[str, Candidate, str] | None:
    """The tuned table's or the shipped defaults' winner for the call's
    shape class on ``device`` (``training``: a class of training steps,
    which only a tuned table holds): (source, candidate, reason), or None
    where neither has the class."""
    c = shape_class(q, k, v, mask, sinks, training)
    if c is None:
        return None
    table = tuned_table.table_for(device)
    if table and c in table.classes:
        entry = table.classes[c]
        fastest_first = sorted(entry.us.items(), key=lambda x: x[1])
        times = ", ".join(f"{name} {us:.1f} us" for name, us in fastest_first)
        return TUNED, Candidate.parse(entry.winner), (
            f"tuned on {table.key['device']} ({table.tuned}): {entry.winner} for "
            f"{c.key()} ({times})"
        )
    key = tuned_table.device_key(device)
    m = routing_defaults.defaults_for(key["backend"], key["device"]).get(c)
    if m is None:
        return None
    winner = Candidate("fused") if m.ours_faster else Candidate(MX_FAST)
    return DEFAULTS, winner, f"measured on {m.describe()}"


# route()'s answers by call signature, so that routing a model's call is a
# lookup: kept while the planner's other inputs (its switches, failed
# builds: _ext.plan_inputs_state) and the tuned tables stay the same.
_routes: dict = {}
_MAX_ROUTES = 4096


def _signature(q, k, v, scale, mask, sinks, device, policy, training) -> tuple | None:
    """What route() decides a call by: shapes and dtypes, the mask's kind
    and shape (never its values), the scale, the device, the policy and
    whether the call is trained; None for arguments route() does not key
    (it answers those afresh)."""
    if type(q) is not mx.array or type(k) is not mx.array or type(v) is not mx.array:
        return None
    if type(scale) not in (float, int):
        return None
    keyed = []
    for x in (mask, sinks):
        if x is None or isinstance(x, str):
            keyed.append(x)
        elif type(x) is mx.array:
            keyed.append((x.shape, x.dtype))
        else:
            return None
    # The device by its type: mx.Device hashes by identity, equal ones apart.
    return (q.shape, q.dtype, k.shape, k.dtype, v.shape, v.dtype, *keyed, scale, device.type,
            policy, training, tuned_table.generation, _ext.plan_inputs_state())  # fmt: skip


def route(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    scale: float,
    mask: None | str | mx.array = None,
    sinks: mx.array | None = None,
    stream: None | mx.Stream | mx.Device = None,
    policy: str = "auto",
    training: bool | None = None,
) -> Route:
    """Where ``patch_mx_fast`` sends this call, and why.

    Returns a ``Route``, the tuple ``(choice, reason)``: ``"fused"`` (this
    package's kernel), ``"fallback"`` (no fused kernel of this package
    covers the call, or the package does not accept its arguments: mx.fast
    runs it, and raises if it rejects it too) or ``"passthrough"`` (mx.fast
    is the faster choice for it on this device); its ``source`` says what
    decided ("tuned", "defaults", "rule", "coverage", "policy") and its
    ``hint`` which of the fused kernel's plans runs. ``policy="fused"``
    routes every call a kernel covers to this package. ``training``: whether
    the call is traced for a gradient, so that its backward runs too (the
    training rules decide it, never the tuned table or the defaults); None
    (the default) reads it from the patched gradient transforms
    (``gradient_trace.py``). The sources are in this module's docstring.
    """
    if policy not in POLICIES:
        raise ValueError(
            f"[route] policy must be one of {', '.join(map(repr, POLICIES))}; got {policy!r}"
        )
    if training is None:
        training = gradient_trace.active()
    device = _device(stream)
    key = _signature(q, k, v, scale, mask, sinks, device, policy, training)
    decided = _routes.get(key) if key is not None else None
    if decided is None:
        decided = _decide(q, k, v, scale, mask, sinks, stream, device, policy, training)
        if key is not None:
            if len(_routes) >= _MAX_ROUTES:
                _routes.clear()
            _routes[key] = decided
    return decided


def _decide(q, k, v, scale, mask, sinks, stream, device, policy, training) -> Route:
    """route()'s answer, from the tuned table, the defaults, the rules and
    the planner."""
    on_cpu = device.type == mx.DeviceType.cpu
    auto = policy == "auto"
    measured = _measured(q, k, v, mask, sinks, device, training) if auto else None
    if measured:
        source, winner, why = measured
        if winner.kind == MX_FAST:
            return Route(PASSTHROUGH, why, source)
    elif auto and training and not on_cpu:
        verdict = _cuda_training_by_shape(q, k, v, mask) if _gpu_backend() == "cuda" else None
        if verdict:
            return Route(*verdict, RULE)
    elif auto and not on_cpu:
        verdict = _by_shape(q, k, v, mask)
        if verdict:
            return Route(*verdict, RULE)
    hint = winner.hint if measured else plans.PlanHint()
    try:
        plan = _package.plan_summary(
            q, k, v, scale=scale, mask=mask, sinks=sinks, stream=stream, hint=hint
        )
    except (TypeError, ValueError) as e:
        return Route(FALLBACK, f"mlx_fused_attn does not accept the call ({e})", COVERAGE)
    if not plan.fused:
        return Route(FALLBACK, f"no fused kernel: {plan.message}", COVERAGE)
    if policy == "fused":
        return Route(FUSED, 'policy="fused"', POLICY)
    if measured:
        return Route(FUSED, why, source, hint)
    if training:
        return Route(FUSED, _training_reason(device), RULE)
    if on_cpu:
        return Route(FUSED, (
            "CPU: MLX's CPU attention is unfused (B=1 H=32 L=1024 D=64 fp16: "
            "111 ms against 3927 ms on 2 cores)"
        ), RULE)  # fmt: skip
    if _gpu_backend() == "cuda":
        return Route(*_cuda_by_kernel(q, k, v, mask, plan), RULE)
    # Only Metal is left: a GPU build without kernels covers nothing.
    return Route(FUSED, (
        f"Metal: L_q >= {METAL_MIN_QUERIES} fills a query block and head dims up to "
        f"{METAL_MAX_HEAD_DIM} (unmeasured on Apple hardware)"
    ), RULE)  # fmt: skip
