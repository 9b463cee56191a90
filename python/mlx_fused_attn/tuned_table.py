"""The tuned table: the winner per shape class that ``tune`` measured on
this machine, kept in one small JSON file in the user's cache directory
(``platformdirs``; ``MLX_FUSED_ATTN_TUNED_FILE`` names another file).

The file holds one table per device tuned::

    {"format": 1, "tables": [{
      "key": {"backend": "cuda", "device": "NVIDIA H100 80GB HBM3",
              "device_info": {...}, "cores": 132, "os": "Linux 6.8.0",
              "mlx": "0.32.4", "package": "0.1.0"},
      "tuned": "2026-12-06T10:00:00Z",
      "classes": {"bfloat16 D=128/128 mask=none gqa=4 BH<=32 Lq<=1 Lk<=4096":
                  {"winner": "fused", "us": {"fused": 11.2, "mx.fast": 19.3},
                   "skipped": {}, "calls": ["B=1 H=32/8 Lq=1 Lk=4096 ..."]}}}]}

A table serves only the device whose key it carries: a change of device,
core or multiprocessor count, OS release, MLX or package version leaves it
unused (and the next ``tune`` drops it). A file that cannot be read as
such gives one ``RuntimeWarning`` and is ignored.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import re
import subprocess
import tempfile
import warnings
from functools import cache
from typing import NamedTuple

import mlx.core as mx

from .shape_class import ShapeClass

FORMAT = 1
PATH_VARIABLE = "MLX_FUSED_ATTN_TUNED_FILE"
FILE_NAME = "tuned.json"


def path() -> pathlib.Path:
    """Where the tuned table lives: ``MLX_FUSED_ATTN_TUNED_FILE``, else
    ``tuned.json`` in the user's cache directory for this package."""
    named = os.environ.get(PATH_VARIABLE)
    if named:
        return pathlib.Path(named)
    import platformdirs

    return pathlib.Path(platformdirs.user_cache_dir("mlx_fused_attn")) / FILE_NAME


def _backend(device: mx.Device) -> str:
    if device.type == mx.DeviceType.cpu:
        return "cpu"
    from . import build_info

    return build_info()["gpu_backend"]


def device_key(device: mx.Device) -> dict:
    """What a table's measurements depend on besides the calls: the
    device (MLX's name for it and whatever counts and architecture MLX
    reports), the CPU count on the CPU, the OS release, and the MLX and
    package versions."""
    return _device_key(device.type)


@cache
def _device_key(kind: mx.DeviceType) -> dict:
    from . import __version__

    device = mx.Device(kind)
    info = mx.device_info(device)
    # Sizes of memory in use would change between runs; the rest describes
    # the device.
    described = {
        k: v
        for k, v in sorted(info.items())
        if isinstance(v, (str, int)) and "free" not in k and "used" not in k
    }
    backend = _backend(device)
    return {
        "backend": backend,
        "device": str(info.get("device_name", device)),
        "device_info": described,
        "cores": _cores(backend),
        "os": f"{platform.system()} {platform.release()}",
        "mlx": mx.__version__,
        "package": __version__,
    }


def _cores(backend: str) -> int | None:
    """The CPU's cores, the CUDA GPU's multiprocessors, or the Apple GPU's
    cores (IORegistry's gpu-core-count: MLX reports none, and one name
    covers GPUs of several core counts); None where unknown."""
    if backend == "cpu":
        return os.cpu_count()
    if backend == "cuda":
        from . import _ext

        return _ext.cuda_multiprocessors()
    if backend == "metal":
        try:
            out = subprocess.run(["ioreg", "-r", "-d", "1", "-c", "AGXAccelerator"],
                                 capture_output=True, text=True, timeout=10).stdout  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        return apple_gpu_cores(out)
    return None


def apple_gpu_cores(ioreg_text: str) -> int | None:
    """The ``"gpu-core-count" = N`` of ``ioreg -r -d 1 -c AGXAccelerator``."""
    match = re.search(r'"gpu-core-count"\s*=\s*(\d+)', ioreg_text)
    return int(match.group(1)) if match else None


class TunedClass(NamedTuple):
    """One shape class's measurement."""

    winner: str  # a candidate's name (candidates.py)
    us: dict  # candidate name -> median microseconds a call
    skipped: dict  # candidate name -> why it was not timed
    calls: list  # the calls timed, described
    # candidate name -> its median us on each call, in `calls`' order (the
    # winner is decided on these; absent from tables tuned before them)
    per_call: dict = {}


class Table(NamedTuple):
    key: dict
    tuned: str  # when, ISO 8601 UTC
    classes: dict  # ShapeClass -> TunedClass


def _parse(doc) -> list[Table]:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a format-{FORMAT} tuned table")
    tables = []
    for t in doc["tables"]:
        classes = {
            ShapeClass.from_key(name): TunedClass(**entry) for name, entry in t["classes"].items()
        }
        if not isinstance(t["key"], dict):
            raise ValueError("a table's key is not an object")
        tables.append(Table(t["key"], str(t["tuned"]), classes))
    return tables


def read(file: pathlib.Path | None = None) -> list[Table]:
    """Every table of the file; none where there is no file, and none with
    a RuntimeWarning where it cannot be read as a tuned table."""
    file = file or path()
    try:
        text = file.read_text()
    except FileNotFoundError:
        return []
    try:
        return _parse(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        warnings.warn(
            f"[mlx_fused_attn] the tuned table {file} cannot be read ({type(e).__name__}: {e}); "
            "ignoring it: routing uses the shipped defaults (python -m mlx_fused_attn.tune "
            "writes a new one)",
            RuntimeWarning,
            stacklevel=2,
        )
        return []


def table_for(device: mx.Device) -> Table | None:
    """The table tuned on this device as it is now, or None. Read once a
    process (``forget`` reads again)."""
    return _table_for(device.type)


@cache
def _table_for(kind: mx.DeviceType) -> Table | None:
    key = device_key(mx.Device(kind))
    return next((t for t in read() if t.key == key), None)


# How many times the tables were forgotten: route() keeps its answers
# while it stays the same.
generation = 0


def forget() -> None:
    """Read the file again at the next lookup (after ``tune`` wrote it, or
    in tests)."""
    global generation
    _table_for.cache_clear()
    _device_key.cache_clear()
    generation += 1


def _to_json(table: Table) -> dict:
    return {
        "key": table.key,
        "tuned": table.tuned,
        "classes": {c.key(): e._asdict() for c, e in sorted(table.classes.items())},
    }


def write(device: mx.Device, classes: dict, file: pathlib.Path | None = None) -> Table:
    """Merge ``classes`` (ShapeClass -> TunedClass) into this device's table
    and write the file, dropping tables whose key no device here has any
    more. Returns the device's table as written."""
    from . import _strict_json

    file = file or path()
    key = device_key(device)
    here = [device_key(d) for d in (mx.Device(mx.cpu), mx.Device(mx.gpu)) if mx.is_available(d)]
    tables = read(file)
    kept = [t for t in tables if t.key in here and t.key != key]
    old = next((t for t in tables if t.key == key), None)
    merged = dict(old.classes) if old else {}
    merged.update(classes)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    table = Table(key, now, merged)
    doc = {"format": FORMAT, "tables": [_to_json(t) for t in kept + [table]]}
    file.parent.mkdir(parents=True, exist_ok=True)
    # Written whole and renamed, so that a reader never sees half a file.
    with tempfile.NamedTemporaryFile("w", dir=file.parent, suffix=".tmp", delete=False) as f:
        tmp = f.name
    _strict_json.dump(doc, tmp)
    os.replace(tmp, file)
    forget()
    return table
