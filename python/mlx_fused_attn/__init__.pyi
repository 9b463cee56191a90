from typing import Literal, NamedTuple

import mlx.core as mx

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
    stream: None | mx.Stream | mx.Device = None,
) -> mx.array: ...
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
) -> tuple[Literal["fused", "fallback", "passthrough"], str]: ...
