from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Literal, NamedTuple

import mlx.core as mx

from .shape_class import ShapeClass
from .tuning import Call

__version__: str

class FallbackWarning(UserWarning): ...

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
) -> mx.array | tuple[mx.array, mx.array]: ...
def merge_attention(
    outs: Sequence[mx.array], lses: Sequence[mx.array]
) -> tuple[mx.array, mx.array]: ...
def varlen_attention(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    cu_seqlens_q: mx.array | Sequence[int],
    cu_seqlens_k: mx.array | Sequence[int] | None = None,
    *,
    scale: float,
    causal: bool = False,
    return_lse: bool = False,
    stream: None | mx.Stream | mx.Device = None,
) -> mx.array | tuple[mx.array, mx.array]: ...
def pack_padded(
    x: mx.array, lengths: mx.array | Sequence[int], *, padding: Literal["right", "left"] = "right"
) -> tuple[mx.array, mx.array]: ...
def unpack_padded(
    packed: mx.array,
    cu_seqlens: mx.array | Sequence[int],
    max_len: int,
    *,
    padding: Literal["right", "left"] = "right",
) -> mx.array: ...
def ring_attention(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    scale: float | None = None,
    causal: bool = False,
    group: mx.distributed.Group | None = None,
    layout: Literal["contiguous", "zigzag"] = "contiguous",
) -> mx.array: ...
def ring_shard(
    x: mx.array, rank: int, size: int, *, layout: Literal["contiguous", "zigzag"] = "contiguous", axis: int = 2
) -> mx.array: ...
def ring_unshard(
    parts: Sequence[mx.array], *, layout: Literal["contiguous", "zigzag"] = "contiguous", axis: int = 2
) -> mx.array: ...
def ring_deadline(seconds: float) -> AbstractContextManager[None]: ...
def can_use_fused(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    scale: float,
    mask: None | str | mx.array = None,
    sinks: mx.array | None = None,
    stream: None | mx.Stream | mx.Device = None,
) -> tuple[bool, str]: ...
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
) -> mx.array: ...
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
) -> tuple[bool, str]: ...
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
) -> mx.array: ...
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
) -> tuple[bool, str]: ...
def build_info() -> dict[str, str | bool]: ...
def kernel_status() -> list[dict[str, str]]: ...

class PatchStats(NamedTuple):
    fused: int
    fallback: int
    passed_through: int

class MxFastPatch:
    policy: str
    @property
    def active(self) -> bool: ...
    @property
    def stats(self) -> PatchStats: ...
    def remove(self) -> bool: ...
    def __enter__(self) -> MxFastPatch: ...
    def __exit__(self, *exc: object) -> None: ...

def patch_mx_fast(*, policy: Literal["auto", "fused"] = "auto") -> MxFastPatch: ...
def unpatch_mx_fast() -> bool: ...
def patch_stats() -> PatchStats: ...
def route(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    scale: float,
    mask: None | str | mx.array = None,
    sinks: mx.array | None = None,
    stream: None | mx.Stream | mx.Device = None,
    policy: Literal["auto", "fused"] = "auto",
    training: bool | None = None,
) -> Route: ...

class Route(tuple[Literal["fused", "fallback", "passthrough"], str]):
    source: Literal["tuned", "defaults", "rule", "coverage", "policy"]
    hint: PlanHint
    @property
    def choice(self) -> Literal["fused", "fallback", "passthrough"]: ...
    @property
    def reason(self) -> str: ...

class PlanHint(NamedTuple):
    short_kernel: bool = True
    max_key_splits: int = 0
    metal_variant: str | None = None

class PlanSummary(NamedTuple):
    code: Literal["cpu_kernel", "short_kernel", "keys_split", "general_kernel", "no_kernel"]
    message: str
    family: str
    key_splits: int
    packed_gqa: bool
    tiles: dict[str, int]
    split_merge: bool = False
    combine_form: Literal["", "one_element", "grouped"] = ""
    @property
    def fused(self) -> bool: ...

def plan_summary(
    q: mx.array,
    k: mx.array,
    v: mx.array,
    *,
    scale: float,
    mask: None | str | mx.array = None,
    sinks: mx.array | None = None,
    stream: None | mx.Stream | mx.Device = None,
    hint: PlanHint = ...,
) -> PlanSummary: ...

class ClassResult(NamedTuple):
    shape_class: ShapeClass
    winner: str
    us: dict[str, float]
    skipped: dict[str, str]
    calls: list[str]
    def speedup(self) -> float | None: ...

def tune(
    calls: Iterable[Call],
    *,
    device: mx.Device | None = None,
    warmup: int = 1,
    repeats: int = 10,
    budget_s: float = 1.0,
    prune: float = 4.0,
    clock: Callable[[], float] = ...,
    save: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[ClassResult]: ...
