"""The shipped routing defaults: dated measurements of this package's fused
kernel against mx.fast (``routing_defaults.json``, each with its device,
date, commit and where the numbers are written), looked up by shape class
where no tuned table covers a call.

An entry serves the calls of its shape class (``shape_class.py``) on
devices of its backend; where entries of the running device exist for a
class (its name contains the entry's ``device``), they win over other
devices' entries, and among those the newest wins. An entry with
``superseded`` (a measurement of a kernel that no longer runs its call)
is kept for the record and not used.
"""

from __future__ import annotations

import json
import pathlib
from functools import cache
from typing import NamedTuple

from .shape_class import ShapeClass, class_of_sizes

PATH = pathlib.Path(__file__).with_name("routing_defaults.json")
BACKENDS = ("cpu", "cuda", "metal")


class Measurement(NamedTuple):
    """One timed call behind a default."""

    backend: str  # "cpu", "cuda" or "metal"
    device: str  # the device as its run names it
    date: str
    commit: str | None  # None: the run did not record it
    case: str  # the call, as the run describes it
    B: int
    H_q: int
    H_kv: int
    L_q: int
    L_k: int
    D: int
    D_v: int
    dtype: str
    mask: str  # a shape class's mask kind
    ours_us: float  # this package, per call
    mx_fast_us: float  # mx.fast.scaled_dot_product_attention, per call
    timing: str  # how the times were taken
    source: str  # where the numbers are written
    superseded: str | None = None  # why the entry is not used, where it is not

    @property
    def ours_faster(self) -> bool:
        return self.ours_us < self.mx_fast_us

    def shape_class(self) -> ShapeClass:
        return class_of_sizes(
            B=self.B, H_q=self.H_q, H_kv=self.H_kv, L_q=self.L_q, L_k=self.L_k,
            D=self.D, D_v=self.D_v, dtype=self.dtype, mask=self.mask,
        )  # fmt: skip

    def describe(self) -> str:
        commit = f"commit {self.commit}" if self.commit else "commit not recorded"
        return (
            f"{self.device}, {self.date}, {commit}: ours {self.ours_us:g} us against "
            f"mx.fast {self.mx_fast_us:g} us ({self.case}; {self.source})"
        )


@cache
def measurements() -> tuple[Measurement, ...]:
    """Every entry of the shipped file."""
    with open(PATH) as f:
        doc = json.load(f)
    return tuple(Measurement(**entry) for entry in doc["measurements"])


@cache
def defaults_for(backend: str, device_name: str) -> dict[ShapeClass, Measurement]:
    """The defaults on a device of ``backend`` named ``device_name``: one
    measurement per shape class, the running device's own first, then the
    newest."""
    table: dict[ShapeClass, Measurement] = {}
    # Later entries overwrite earlier ones: the preferred go last.
    preferred_last = sorted(
        (m for m in measurements() if m.backend == backend and not m.superseded),
        key=lambda m: (m.device.lower() in device_name.lower(), m.date),
    )
    for m in preferred_last:
        table[m.shape_class()] = m
    return table
