"""JSON that every JSON parser reads: a float that is not finite (a time
that was not measured, an error that is NaN) is written as ``null``, where
Python's ``json`` would write the bare ``NaN`` or ``Infinity`` that the JSON
grammar does not have."""

from __future__ import annotations

import json
import math


def finite_or_null(obj):
    """`obj` with every non-finite float, at any depth of dicts, lists and
    tuples, replaced by None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_null(v) for v in obj]
    return obj


def dump(obj, path) -> None:
    """Write `obj` to the file at `path` as strict JSON (indented)."""
    with open(path, "w") as f:
        json.dump(finite_or_null(obj), f, indent=1, allow_nan=False)
        f.write("\n")
