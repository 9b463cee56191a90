"""Checks this install on this machine, and reports what a bug report needs.

    python -m mlx_fused_attn.selftest [--device cpu|gpu] [--quick] [--json PATH]

On one device (default: MLX's default device) it runs every kernel family
with self-test cases (general attention, short sequences, neighborhood 1-D
and 2-D, attention over a quantized K/V cache, and the strided-copy path)
over dtypes, head dims, masks, GQA, sinks and strided inputs; compares each
output with a float64 NumPy reference and with
mx.fast.scaled_dot_product_attention; says whether each case ran fused
(and why not); times the fused ones against mx.fast; and prints a table, the
kernel families that failed to build, the warnings raised, and a verdict.

A case is right when its error is within twice the error of the same
attention computed naively in the input dtype (mx.fast on the CPU) plus a
per-dtype floor. A fallback to plain MLX ops is reported, with its reason,
but is not a failure. Exit status: 0 every result right; 1 a wrong result
(or a case that raised); 2 the device asked for is not available.

A family's cases are its folder's
mlx_fused_attn/families/<folder>/<folder>_selftest.py, installed as
mlx_fused_attn.selftest_cases.<folder>: cases(add, dtype, quick) adds its
calls, built by mlx_fused_attn._selftest_calls.

Test-only hook: MLX_FUSED_ATTN_SELFTEST_CORRUPT=1 adds 1 to one element of
the selftest's own copy of the first case's output, to show that a wrong
result fails the verdict (tests/test_selftest.py). Nothing else reads it.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import pkgutil
import platform
import statistics
import sys
import time
import warnings

# Before the first call: outputs are filled with NaN before every kernel
# runs, so an element a kernel fails to write fails its case (MLX's buffer
# cache could otherwise hand it memory holding a right answer); and MLX's
# CUDA backend keeps float32 products in float32 (else the fallback's
# float32 results would be TF32's).
os.environ.setdefault("MLX_FUSED_ATTN_POISON", "1")
os.environ.setdefault("MLX_ENABLE_TF32", "0")

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

import mlx_fused_attn as fa  # noqa: E402
from mlx_fused_attn import _reference as ref  # noqa: E402
from mlx_fused_attn import _strict_json as strict_json  # noqa: E402
from mlx_fused_attn import selftest_cases  # noqa: E402
from mlx_fused_attn._selftest_calls import DTYPES  # noqa: E402

CORRUPT_ENV = "MLX_FUSED_ATTN_SELFTEST_CORRUPT"
# Error floors for outputs of magnitude ~1: a few units in the last place
# of the dtype (the fused kernels round once, on the store).
FLOOR = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-5}


@dataclasses.dataclass
class Result:
    family: str
    case: str
    dtype: str
    head_dim: int
    seed: int
    fused: bool
    reason: str  # can_use_fused's: why not fused, or which fused kernel
    yardstick: str  # Case.yardstick (_selftest_calls.py): what the mx.fast columns ran
    max_err: float | None = None  # ours against the reference
    mx_fast_err: float | None = None  # mx.fast on this device, likewise
    tol: float | None = None
    ok: bool = False
    ms_ours: float | None = None
    ms_mx_fast: float | None = None
    error: str = ""  # why it is wrong: NaNs, or what ours raised
    note: str = ""  # what mx.fast raised, where it did


def grid(device, quick):
    """The cases: each kernel family's (its module of
    mlx_fused_attn.selftest_cases), for each dtype, in the modules' order;
    each case's seed is 1000 times its index."""
    cases = []

    def add(build, *names, **kw):
        cases.append(build(*names, seed=1000 * len(cases), device=device, **kw))

    families = [
        importlib.import_module(f"{selftest_cases.__name__}.{m.name}")
        for m in sorted(pkgutil.iter_modules(selftest_cases.__path__), key=lambda m: m.name)
    ]
    for dtype in DTYPES:
        for family in families:
            family.cases(add, dtype, quick)
    return cases



# ---- Running a case ----------------------------------------------------------


def median_ms(fn, runs):
    mx.eval(fn())  # warm: builds pipelines, fills caches
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        mx.eval(fn())  # one eval a call: returns when the work is done
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def max_error(got, want):
    finite = ~np.isnan(want)
    return float(np.abs(got - want)[finite].max(initial=0.0))


def run_case(case, device, runs, corrupt):
    r = Result(case.family, case.name, case.dtype, case.head_dim, case.seed, False, "",
               case.yardstick)
    try:
        r.fused, r.reason = case.can_fuse()
        want = case.reference()
        got = ref.to_float64(case.ours())
        if corrupt:
            got.flat[0] += 1.0
        naive = ref.to_float64(case.mx_fast(mx.cpu))
        r.max_err = max_error(got, want)
        scale = max(1.0, float(np.abs(want[~np.isnan(want)]).max(initial=0.0)))
        r.tol = 2 * max_error(naive, want) + FLOOR[case.dtype] * scale
        same_nans = np.array_equal(np.isnan(got), np.isnan(want))
        r.ok = same_nans and r.max_err <= r.tol
        if not same_nans:
            r.error = "NaN where the reference has none (or the reverse)"
        if r.fused:
            r.ms_ours = median_ms(case.ours, runs)
    except Exception as e:  # a kernel that raises is a wrong result too
        r.ok = False
        r.error = f"{type(e).__name__}: {e}"
        return r
    # mx.fast on this device is a yardstick, not under test: its failure is
    # noted, not counted.
    try:
        r.mx_fast_err = max_error(ref.to_float64(case.mx_fast(device)), want)
        if r.fused:
            r.ms_mx_fast = median_ms(lambda: case.mx_fast(device), runs)
    except Exception as e:
        r.note = f"mx.fast raised {type(e).__name__}: {e}"
    return r


# ---- Report --------------------------------------------------------------------


def device_description(device):
    name = "gpu" if device == mx.gpu else "cpu"
    try:
        info = mx.device_info(device)
    except (AttributeError, RuntimeError, ValueError) as e:
        return f"{name} (MLX gives no device information: {e})"
    details = ", ".join(str(info[k]) for k in ("device_name", "architecture") if k in info)
    return f"{name} ({details or info})"


def environment(device, quick, count):
    return {
        "device": device_description(device),
        "os": platform.platform(),
        "python": platform.python_version(),
        "mlx": mx.__version__,
        "mlx_fused_attn": fa.__version__,
        "build": " ".join(f"{k}={v}" for k, v in fa.build_info().items()),
        "grid": f"{'quick' if quick else 'full'} ({count} cases)",
    }


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


COLUMNS = [
    # (title, width, cell)
    ("family", 19, lambda r: r.family),
    ("case", 28, lambda r: r.case),
    ("dtype", 8, lambda r: r.dtype),
    ("D", 3, lambda r: str(r.head_dim)),
    ("fused?", 6, lambda r: "yes" if r.fused else "no"),
    ("max err", 8, lambda r: fmt(r.max_err, ".2e")),
    ("tol", 8, lambda r: fmt(r.tol, ".2e")),
    ("against", 12, lambda r: r.yardstick),
    ("fast err", 8, lambda r: fmt(r.mx_fast_err, ".2e")),
    ("ok", 4, lambda r: "ok" if r.ok else "FAIL"),
    ("ms ours", 8, lambda r: fmt(r.ms_ours, ".3f")),
    ("ms mx.fast", 10, lambda r: fmt(r.ms_mx_fast, ".3f")),
    ("fast/ours", 9, lambda r: fmt(r.ms_mx_fast / r.ms_ours if r.ms_ours else None, ".2f")),
]


def table(results):
    def row(cells):
        # The first three columns (names) to the left, the rest to the right.
        widths = [w for _, w, _ in COLUMNS]
        padded = [
            c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ]
        return "  ".join(padded).rstrip()

    lines = [row([title for title, _, _ in COLUMNS])]
    lines.append(row(["-" * w for _, w, _ in COLUMNS]))
    lines += [row([cell(r) for _, _, cell in COLUMNS]) for r in results]
    return "\n".join(lines)


def label(r):
    return f"{r.family}/{r.case} {r.dtype} D={r.head_dim} (seed {r.seed})"


def verdict(results):
    wrong = [r for r in results if not r.ok]
    fallbacks = [r for r in results if not r.fused]
    if wrong:
        return False, (
            f"FAIL: {len(wrong)} of {len(results)} cases gave a wrong result "
            f"({'; '.join(label(r) for r in wrong[:3])}{'; ...' if len(wrong) > 3 else ''})"
        )
    if fallbacks:
        return True, (
            f"PASS: all {len(results)} results right; {len(results) - len(fallbacks)} ran "
            f"fused, {len(fallbacks)} FELL BACK to plain MLX ops (reasons above)"
        )
    return True, f"PASS: all {len(results)} results right, all fused"


def report(env, results, status, caught, ok, line):
    print("mlx_fused_attn selftest")
    for key, value in env.items():
        print(f"  {key + ':':15} {value}")
    print()
    print(table(results))
    print("  max err: ours against a float64 reference; tol: twice the error of the naive")
    print("  computation in the dtype, plus a floor; against: what the mx.fast columns ran")
    print("  (mx.fast+mask: mx.fast with the neighborhood as a dense bool mask); fast err: its")
    print("  error on this device. Times: median ms a call (one eval each, outputs NaN-filled")
    print("  first); fast/ours > 1: ours is faster.")
    for r in results:
        if r.error:
            print(f"error in {label(r)}: {r.error}")
        if r.note:
            print(f"note on {label(r)}: {r.note}")
    reasons = {}
    for r in results:
        if not r.fused:
            reasons.setdefault(r.reason, []).append(r)
    if reasons:
        print("\nfallbacks (run as plain MLX ops; not failures):")
        for reason, rs in reasons.items():
            print(f"  {len(rs)} case(s), e.g. {label(rs[0])}: {reason}")
    failures = [s for s in status if s["reason"]]
    if failures:
        print("\nkernel families that could not be built or loaded:")
        for s in failures:
            print(f"  {s['family']} on {s['device']} ({s['what']}): {s['reason']}")
    if caught:
        print("\nwarnings:")
        for w in caught:
            print(f"  {w['category']}: {w['message']}")
    print(f"\nVERDICT: {line}")


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m mlx_fused_attn.selftest", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--device", choices=("cpu", "gpu"),
                        help="default: MLX's default device")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="a smaller grid (CI)")
    parser.add_argument("--json", metavar="PATH", help="also write the results here")
    args = parser.parse_args(argv)

    name = args.device or ("gpu" if mx.default_device() == mx.gpu else "cpu")
    device = mx.gpu if name == "gpu" else mx.cpu
    if not mx.is_available(device):
        print(f"selftest: MLX has no {name} device here", file=sys.stderr)
        return 2
    mx.set_default_device(device)
    corrupt = os.environ.get(CORRUPT_ENV) == "1"
    cases = grid(device, args.quick)
    runs = 3 if args.quick else 7
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [run_case(c, device, runs, corrupt and i == 0) for i, c in enumerate(cases)]
    caught = [{"category": w.category.__name__, "message": str(w.message)} for w in caught]
    status = fa.kernel_status()
    ok, line = verdict(results)
    env = environment(device, args.quick, len(cases))
    report(env, results, status, caught, ok, line)
    if args.json:
        strict_json.dump(
            {"environment": env, "results": [dataclasses.asdict(r) for r in results],
             "kernel_status": status, "warnings": caught, "verdict": line, "passed": ok},
            args.json,
        )  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
