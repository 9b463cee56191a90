"""Which attention a call through the patched ``mx.fast`` runs: this
package's fused kernel or MLX's own, decided per device from measurements.

``route(...)`` returns ``(choice, reason)``; the choice is one of

- ``"fused"``: this package's fused kernel runs the call;
- ``"fallback"``: no fused kernel of this package covers the call (or the
  package does not accept its arguments), so ``mx.fast`` runs it;
- ``"passthrough"``: on this device ``mx.fast`` is the faster choice for
  the call, so ``mx.fast`` runs it (where the shapes alone decide that,
  whether a kernel of this package covers the call is not checked).

The rules, one per device, rest on the numbers in ``MEASUREMENTS`` (and in
``benchmarks/RESULTS.md``):

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

``policy="fused"`` skips the device rule: every call a fused kernel covers
runs fused (for the memory a fused kernel saves, for float32 accuracy on
CUDA, where mx.fast multiplies in TF32, or to test the kernels inside a
model).
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import mlx.core as mx

import mlx_fused_attn as _package  # this module loads while the package does

FUSED = "fused"
FALLBACK = "fallback"
PASSTHROUGH = "passthrough"
POLICIES = ("auto", "fused")

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
# can_use_fused's reason for calls the short-sequence kernel takes (README,
# "Short sequences").
SHORT_KERNEL_REASON = "short-sequence kernel"
# can_use_fused's reason where the general kernel splits the keys over a
# grid under one wave (attention_planner.h's kKeySplitsNote).
KEY_SPLITS_REASON = "keys split"


class Measurement(NamedTuple):
    """One timed case behind a routing rule."""

    device: str  # the rule it supports: "cpu", "cuda" or "metal"
    case: str  # shapes and dtype
    ours_us: float  # this package, per call
    mx_fast_us: float  # mx.fast.scaled_dot_product_attention, per call
    run: str  # machine, date, commit and where the numbers are written


_CPU_RUN = (
    "2-core AMD EPYC (x86-64, AVX2), MLX 0.32.4, 2026-11-29, sdpa_bench.py; "
    "benchmarks/RESULTS.md 'CPU: 2-core AMD EPYC, Linux', 'Attention'"
)
_CPU_DECODE_RUN = (
    "2-core AMD EPYC (x86-64, AVX2), MLX 0.32.4, 2026-12-01 11:47 UTC, "
    "kernels of commit e78961d, wall-clock median of 20 calls, machine shared "
    "(load average 10); benchmarks/RESULTS.md 'CPU', 'mlx-lm model'"
)
_H200_LONG_RUN = (
    "H200, MLX 0.32.4 CUDA, 2026-11-29, commit 4e93279, CUPTI kernel time; "
    "benchmarks/RESULTS.md 'Attention, head dims 64-128'"
)
_H200_SHORT_RUN = (
    "H200, MLX 0.32.4 CUDA, 2026-11-29 17:12 UTC, tree of ec8f870, CUPTI; "
    "benchmarks/RESULTS.md 'Many short sequences (L <= 64)'"
)
_H200_PRODUCER_RUN = (
    "H200, MLX 0.32.4 CUDA, 2026-12-02, commit 8f32aeb (the D = 128 forward's "
    "producer warpgroup), CUPTI kernel time; benchmarks/RESULTS.md 'Attention, "
    "head dims 64-128'"
)
_H200_OLD_RUN = (
    "H200, MLX 0.32.4 CUDA, 2026-11-29, commit 504d6f3 (older general "
    "kernel, managed-memory outputs), CUPTI; benchmarks/RESULTS.md "
    "'Attention, fp32 and L <= 256'"
)
_H200_WORKLOAD_RUN = (
    "H200, MLX 0.32.4 CUDA, 2026-12-01 18:41 UTC, commit 4daadc6, CUPTI kernel "
    "time; benchmarks/RESULTS.md 'Calls models make'"
)
_H200_MASK_RUN = (
    "H200, MLX 0.32.4 CUDA, 2026-12-02 05:36 UTC, commit 8265377, CUPTI kernel "
    "time; benchmarks/RESULTS.md 'Calls models make'"
)
_H200_LONG_CACHE_RUN = (
    "H200, MLX 0.32.4 CUDA, 2026-12-02 11:56 UTC, commit 4482bde, CUPTI kernel "
    "time; benchmarks/RESULTS.md 'Calls models make'"
)
_H200_BATCHED_RUN = (
    "H200, MLX 0.32.4 CUDA, 2026-12-03, tree of commit 14b5e3c, CUPTI kernel "
    "time; benchmarks/RESULTS.md 'Calls models make'"
)
_H200_SPLIT_RULE_RUN = (
    "H200, MLX 0.32.4 CUDA, 2026-12-03 12:22 UTC, tree of 5d68310 with the split rule "
    "of the next commit, CUPTI kernel time; benchmarks/RESULTS.md 'Calls models make'"
)
_H200_HEAD_DIM_RUN = (
    "H200, MLX 0.32.4 CUDA, 2026-12-01 13:27 UTC, commit 8109ed7, CUPTI kernel time; "
    "mx.fast runs plain MLX ops past cuDNN's head dims"
)

MEASUREMENTS = (
    Measurement("cpu", "B=1 H=32 L=128 D=64 float16", 2060, 60300, _CPU_RUN),
    Measurement("cpu", "B=1 H=32 L=1024 D=64 float16", 111300, 3927300, _CPU_RUN),
    Measurement("cpu", "B=1 H=32 L=1024 D=128 float32", 269700, 8294400, _CPU_RUN),
    Measurement(
        "cpu",
        "decode B=1 H_q=32 H_kv=8 L_q=1 L_k=4096 D=128 float16",
        40233,
        222443,
        _CPU_DECODE_RUN,
    ),
    Measurement(
        "cpu",
        "decode B=1 H_q=32 H_kv=8 L_q=1 L_k=4096 D=128 float32",
        56837,
        58412,
        _CPU_DECODE_RUN,
    ),
    Measurement("cuda", "B=1 H=32 L=512 D=128 float16", 17.4, 11.5, _H200_LONG_RUN),
    Measurement("cuda", "B=1 H=32 L=4096 D=128 bfloat16", 458.5, 410.7, _H200_PRODUCER_RUN),
    Measurement("cuda", "B=1 H=32 L=4096 D=64 float16", 350.9, 301.0, _H200_LONG_RUN),
    Measurement("cuda", "B=4 H=32 L=8192 D=64 bfloat16", 4846.9, 4396.3, _H200_LONG_RUN),
    Measurement("cuda", "B=4 H=32 L=8192 D=128 bfloat16", 6569.3, 6242.6, _H200_PRODUCER_RUN),
    Measurement("cuda", "B=1 H=32 L=1024 D=192 bfloat16", 83.5, 131.8, _H200_HEAD_DIM_RUN),
    Measurement("cuda", "B=1 H=32 L=4096 D=192 bfloat16", 1003.1, 1664.8, _H200_HEAD_DIM_RUN),
    Measurement("cuda", "B=1 H=32 L=1024 D=256 bfloat16", 107.6, 144.1, _H200_HEAD_DIM_RUN),
    Measurement("cuda", "B=1 H=32 L=4096 D=256 bfloat16", 1275.0, 1811.1, _H200_HEAD_DIM_RUN),
    Measurement("cuda", "B=1000 H=80 L=32 D=64 float16", 338.7, 1276.6, _H200_SHORT_RUN),
    Measurement("cuda", "B=1000 H=160 L=48 D=32 float16", 515.0, 2548.4, _H200_SHORT_RUN),
    Measurement("cuda", "B=1000 H=80 L=32 D=64 float32", 733.2, 3040.7, _H200_SHORT_RUN),
    Measurement("cuda", "B=2000 H=64 L=16 D=64 float16", 312.4, 2044.2, _H200_SHORT_RUN),
    Measurement("cuda", "B=1000 H=40 L=64 D=128 float16", 763.7, 855.9, _H200_SHORT_RUN),
    Measurement("cuda", "B=1 H=8 L=64 D=64 float16", 3.5, 5.2, _H200_SHORT_RUN),
    Measurement("cuda", "B=1 H=32 L=256 D=128 float16", 13.1, 8.0, _H200_OLD_RUN),
    Measurement("cuda", "B=1 H=32 L=1024 D=64 float32", 237.6, 197.1, _H200_OLD_RUN),
    Measurement("cuda", "B=1 H=32 L=1024 D=128 float32", 576.9, 217.8, _H200_OLD_RUN),
    Measurement("cuda", "B=1 H=32 L=32 D=64 float16", 8.3, 4.7, _H200_OLD_RUN),
    Measurement(
        "cuda", "decode B=1 H_q=32 H_kv=8 L_k=32768 D=128 bfloat16", 43.2, 44.7, _H200_WORKLOAD_RUN
    ),
    Measurement(
        "cuda", "decode B=1 H_q=32 H_kv=8 L_k=4096 D=128 bfloat16", 12.9, 17.1, _H200_WORKLOAD_RUN
    ),
    Measurement(
        "cuda", "decode B=8 H_q=32 H_kv=8 L_k=32768 D=128 bfloat16", 247.7, 307.2, _H200_WORKLOAD_RUN
    ),
    Measurement(
        "cuda", "decode B=8 H_q=32 H_kv=8 L_k=4096 D=128 bfloat16", 40.3, 74.9, _H200_WORKLOAD_RUN
    ),
    Measurement(
        "cuda",
        "chunked prefill B=1 H_q=32 H_kv=8 L_q=128 L_k=32768 D=128 bfloat16 causal",
        164.4,
        393.5,
        _H200_LONG_CACHE_RUN,
    ),
    Measurement(
        "cuda",
        "chunked prefill B=1 H_q=32 H_kv=8 L_q=128 L_k=4096 D=128 bfloat16 causal",
        33.3,
        53.9,
        _H200_LONG_CACHE_RUN,
    ),
    Measurement(
        "cuda",
        "speculative verify B=1 H_q=32 H_kv=8 L_q=16 L_k=4096 D=128 bfloat16 causal",
        18.4,
        53.3,
        _H200_LONG_CACHE_RUN,
    ),
    Measurement(
        "cuda",
        "speculative verify B=1 H_q=32 H_kv=8 L_q=16 L_k=32768 D=128 bfloat16 causal",
        84.3,
        390.6,
        _H200_LONG_CACHE_RUN,
    ),
    Measurement(
        "cuda", "small grid B=1 H=8 L=1024 D=128 bfloat16 (keys not split)", 18.6, 16.7, _H200_SPLIT_RULE_RUN
    ),
    Measurement(
        "cuda",
        "B=1 H=32 L=2048 D=64 float16, bool mask [1,1,L,L]",
        129.1,
        634.7,
        _H200_MASK_RUN,
    ),
    Measurement(
        "cuda",
        "B=1 H=32 L=2048 D=64 float16, bool mask [1,32,L,L]",
        132.4,
        519.3,
        _H200_MASK_RUN,
    ),
    Measurement(
        "cuda",
        "B=1 H=32 L=2048 D=64 float16, mlx-lm's causal mask as bool",
        76.3,
        630.0,
        _H200_MASK_RUN,
    ),
    Measurement(
        "cuda",
        "B=1 H=32 L=2048 D=64 float16, additive mask [1,1,L,L]",
        129.0,
        144.1,
        _H200_MASK_RUN,
    ),
    Measurement(
        "cuda",
        "B=1 H=32 L=2048 D=64 float16, additive mask [1,32,L,L]",
        132.8,
        159.7,
        _H200_MASK_RUN,
    ),
    Measurement(
        "cuda",
        "B=1 H=32 L=2048 D=64 float16, ALiBi causal [1,32,L,L]",
        141.4,
        160.5,
        _H200_MASK_RUN,
    ),
    Measurement(
        "cuda",
        "batched decode B=8 H_q=32 H_kv=8 L_k=4096 D=128 bfloat16, "
        "mlx-lm's left-padding bool mask [B,1,1,L_k]",
        33.9,
        285.1,
        _H200_BATCHED_RUN,
    ),
    Measurement(
        "cuda",
        "batched decode B=8 H_q=32 H_kv=8 L_k=32768 D=128 bfloat16, "
        "mlx-lm's left-padding bool mask [B,1,1,L_k]",
        212.7,
        2141.4,
        _H200_BATCHED_RUN,
    ),
    Measurement(
        "cuda",
        "batched prefill B=8 H_q=32 H_kv=8 L=512 D=128 bfloat16, mlx-lm's causal left-padding bool mask",
        101.6,
        420.5,
        _H200_BATCHED_RUN,
    ),
)


@cache
def _gpu_backend() -> str:
    return _package.build_info()["gpu_backend"]


def _device(stream) -> mx.Device:
    """The device a call with this ``stream`` argument runs on (a Stream, a
    Device, a DeviceType such as ``mx.cpu``, or None)."""
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
    (its can_use_fused note says so); checked only then, so that other calls
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


def _cuda_by_kernel(
    q: mx.array, k: mx.array, v: mx.array, mask, fused_reason: str
) -> tuple[str, str]:
    if fused_reason.startswith(SHORT_KERNEL_REASON):
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
        if fused_reason.startswith(KEY_SPLITS_REASON):
            return FUSED, (
                f"CUDA: few queries against a long cache, whose keys ours splits "
                f"({fused_reason}) and cuDNN does not (H200, 32/8 heads, D=128 bf16 "
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
) -> tuple[str, str]:
    """Where ``patch_mx_fast`` sends this call, and why.

    Returns ``(choice, reason)``: ``"fused"`` (this package's kernel),
    ``"fallback"`` (no fused kernel of this package covers the call, or the
    package does not accept its arguments: mx.fast runs it, and raises if it
    rejects it too) or ``"passthrough"`` (mx.fast is the faster choice for
    it on this device). ``policy="fused"`` routes every call a kernel
    covers to this package. The rules and the measurements behind them are
    in this module's docstring and ``MEASUREMENTS``.
    """
    if policy not in POLICIES:
        raise ValueError(
            f"[route] policy must be one of {', '.join(map(repr, POLICIES))}; got {policy!r}"
        )
    on_cpu = _device(stream).type == mx.DeviceType.cpu
    if policy == "auto" and not on_cpu:
        verdict = _by_shape(q, k, v, mask)
        if verdict:
            return verdict
    try:
        ok, reason = _package.can_use_fused(
            q, k, v, scale=scale, mask=mask, sinks=sinks, stream=stream
        )
    except (TypeError, ValueError) as e:
        return FALLBACK, f"mlx_fused_attn does not accept the call ({e})"
    if not ok:
        return FALLBACK, f"no fused kernel: {reason}"
    if policy == "fused":
        return FUSED, 'policy="fused"'
    if on_cpu:
        return FUSED, (
            "CPU: MLX's CPU attention is unfused (B=1 H=32 L=1024 D=64 fp16: "
            "111 ms against 3927 ms on 2 cores)"
        )
    if _gpu_backend() == "cuda":
        return _cuda_by_kernel(q, k, v, mask, reason)
    # Only Metal is left: a GPU build without kernels covers nothing.
    return FUSED, (
        f"Metal: L_q >= {METAL_MIN_QUERIES} fills a query block and head dims up to "
        f"{METAL_MAX_HEAD_DIM} (unmeasured on Apple hardware)"
    )
