"""Neighborhood attention: the fused kernel against natten-mlx (where
installed), dense attention over every token, and our explicit-mask fallback,
on whatever device MLX uses. Each fused result is checked against natten-mlx where
it runs.

    python benchmarks/na_bench.py            # the default cases
    python benchmarks/na_bench.py --spatial 64x64 128x128 --kernel 7 13 --heads 8
    python benchmarks/na_bench.py --csv out.csv --json out.json --plot out.png

Shape flags (--spatial, --kernel, --dilation, --causal) replace the default
cases by the product of their values (a flag not given keeps its default);
--heads, --hdim and --dtype apply to every case. Times are in ms (keys and
columns *_ms); a time not measured is empty in the CSV and null in the JSON.

natten-mlx (pip install natten-mlx==0.3.3) has Metal kernels on Macs and a
pure-MLX backend that also runs on Linux; it is imported here with
sys.platform set to "darwin" and its "pure" backend off Apple hardware.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
import textwrap
import time

import mlx.core as mx
import numpy as np

import mlx_fused_attn as fa
from mlx_fused_attn import _strict_json as strict_json
from sdpa_bench import device_name, flops_unit

CASES = [  # name, spatial, heads, head dim, kernel, dilation, causal
    ("1d", (4096,), 8, 64, 13, 1, False),
    ("1d-causal", (4096,), 8, 64, 13, 1, True),
    ("1d-dil", (4096,), 8, 64, 13, 4, False),
    ("2d", (64, 64), 4, 64, 7, 1, False),
    ("2d", (128, 128), 16, 64, 13, 1, False),
    ("3d", (16, 32, 32), 4, 64, 5, 1, False),
]


def spatial_extent(text):
    """'64x64' -> (64, 64): one to three axes."""
    try:
        axes = tuple(int(n) for n in text.lower().split("x"))
    except ValueError:
        axes = ()
    if not 1 <= len(axes) <= 3 or min(axes) < 1:
        raise argparse.ArgumentTypeError(
            f"--spatial takes 1 to 3 positive lengths joined by 'x' (4096, 64x64, 16x32x32); "
            f"got {text!r}")
    return axes


def grid(args):
    """The cases: the default ones, or the product of the shape flags; with
    --heads and --hdim applied to every case."""
    shape_flags = (args.spatial, args.kernel, args.dilation, args.causal)
    if any(f is not None for f in shape_flags):
        cases = [
            (f"{len(sp)}d", sp, 8, 64, k, d, bool(c))
            for sp, k, d, c in itertools.product(
                args.spatial or [(64, 64)], args.kernel or [7], args.dilation or [1],
                args.causal or [0])
        ]
    else:
        cases = list(CASES)
    return [(name, sp, args.heads or H, args.hdim or D, k, d, c)
            for name, sp, H, D, k, d, c in cases]


def load_natten():
    try:
        platform = sys.platform
        sys.platform = "darwin"
        try:
            import natten_mlx
        finally:
            sys.platform = platform
    except ImportError:
        return None
    # Its Metal backend exists only on Apple hardware (has_metal() cannot tell
    # under the faked platform).
    natten_mlx.set_backend("fast_metal" if platform == "darwin" else "pure")
    return natten_mlx


def median_time(fn, iters=5):
    mx.eval(fn())
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        mx.eval(fn())
        mx.synchronize()
        samples.append(time.perf_counter() - t0)
    return float(np.median(samples))


def flops(spatial, H, D, kernel, causal):
    """4 H D times the neighbour pairs (exact for causal windows)."""
    n_axes = len(spatial)
    pairs = 1
    for n in spatial:
        if causal:
            pairs *= sum(min(kernel, j + 1) for j in range(n))
        else:
            pairs *= n * min(kernel, n)
    del n_axes
    return 4.0 * H * D * pairs


def cell(t):
    """A time in ms for the table; a column that did not run says so."""
    return f"{t:>9.2f}" if t == t else f"{'-':>9}"


def plot(rows, path, title):
    """Milliseconds per call of each method, a group of bars per case (log
    scale); a method that did not run for a case has no bar there, and one
    that ran for none is left out of the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = [("t_fused_ms", "mlx_fused_attn"), ("t_natten_ms", "natten-mlx"),
               ("t_dense_ms", "dense attention (mx.fast, every token)")]
    methods = [(key, label) for key, label in methods if any(r[key] == r[key] for r in rows)]
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(rows) + 2), 5))
    x = np.arange(len(rows))
    width = 0.8 / len(methods)
    for i, (key, label) in enumerate(methods):
        ax.bar(x + (i - (len(methods) - 1) / 2) * width, [r[key] for r in rows], width,
               label=label)
    ax.set_yscale("log")
    ax.set_xlim(-0.7, len(rows) - 0.3)
    ax.set_xticks(x, [f"{r['case']}\n{r['spatial']}, H={r['H']}\nk={r['kernel']} d={r['dilation']}"
                      for r in rows], fontsize=8)
    ax.set_xlabel(f"case: spatial extent, heads H, kernel size k, dilation d (D={rows[0]['D']})")
    ax.set_ylabel("ms per call (log scale; lower is faster)")
    ax.set_title("\n".join(textwrap.wrap(title, 90)), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "gpu"])
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    ap.add_argument("--spatial", type=spatial_extent, nargs="+",
                    help="spatial extents, e.g. 4096 64x64 16x32x32 (default 64x64 with other "
                         "shape flags)")
    ap.add_argument("--kernel", type=int, nargs="+", help="kernel sizes (default 7 with other "
                    "shape flags)")
    ap.add_argument("--dilation", type=int, nargs="+", help="dilations (default 1)")
    ap.add_argument("--causal", type=int, nargs="+", choices=[0, 1], help="1: causal (default 0)")
    ap.add_argument("--heads", type=int, help="heads H of every case (default: the case's; 8 "
                    "with shape flags)")
    ap.add_argument("--hdim", type=int, help="head dim D of every case (default: the case's; 64 "
                    "with shape flags)")
    ap.add_argument("--csv", help="write the rows as CSV (times in ms, columns *_ms)")
    ap.add_argument("--json", help="write the rows as JSON (times in ms, keys *_ms)")
    ap.add_argument("--plot", help="write a chart of the times (PNG)")
    ap.add_argument("--no-dense", action="store_true", help="skip dense attention (slow on a CPU)")
    ap.add_argument("--natten-max-pairs", type=float, default=1e7,
                    help="skip natten-mlx's pure backend above this many (query, key) pairs")
    args = ap.parse_args(argv)
    if args.device:
        mx.set_default_device(mx.cpu if args.device == "cpu" else mx.gpu)
    dtype = getattr(mx, args.dtype)
    natten = load_natten()
    natten_name = (f"natten-mlx {natten.version.__version__} ({natten.get_backend()} backend)"
                   if natten else "natten-mlx not installed")
    title = (f"na_bench on {device_name()}, {args.dtype}, mlx {mx.__version__}, "
             f"mlx_fused_attn {fa.__version__}, {natten_name}, {time.strftime('%Y-%m-%d')}")
    print(f"# {title}")
    if natten is None:
        print("# natten-mlx is not installed, so its column is empty and the fused results are "
              "not compared with it here (pip install natten-mlx==0.3.3; "
              "tests/test_neighborhood.py checks the semantics)")
    rows = []
    unit, per_gflops = flops_unit()
    hdr = f"{'case':>10} {'spatial':>10} {'H':>3} {'D':>4} {'k':>3} {'dil':>3} {'causal':>6} " \
          f"{'t_fused':>9} {'t_natten':>9} {'t_dense':>9} {'vs_natten':>9} {unit:>8}"
    print(hdr, flush=True)

    def show(r):
        ratio = r["vs_natten"]
        print(f"{r['case']:>10} {r['spatial']:>10} {r['H']:>3} {r['D']:>4} {r['kernel']:>3} {r['dilation']:>3} "
              f"{str(r['causal']):>6} {cell(r['t_fused_ms'])} {cell(r['t_natten_ms'])} {cell(r['t_dense_ms'])} "
              + (f"{ratio:>8.1f}x" if ratio == ratio else f"{'-':>9}")
              + f" {r['gflops_fused'] / per_gflops:>8.3g}"
              + ("" if r["agree"] else f"  <-- DISAGREES ({r['max_abs_diff']:.3g})")
              + ("" if r["fused_path"] else "  (fallback)"), flush=True)
    for name, spatial, H, D, kernel, dil, causal in grid(args):
        shape = (1,) + spatial + (H, D)
        q, k, v = (mx.random.normal(shape, key=mx.random.key(i)).astype(dtype) for i in range(3))
        mx.eval(q, k, v)
        fused = lambda: fa.neighborhood_attention(q, k, v, kernel, dilation=dil, is_causal=causal)  # noqa: E731
        row = dict(case=name, spatial="x".join(map(str, spatial)), H=H, D=D, kernel=kernel,
                   dilation=dil, causal=causal,
                   fused_path=fa.neighborhood_can_use_fused(q, k, v, kernel, dilation=dil, is_causal=causal)[0])
        out = fused()
        row["t_fused_ms"] = 1e3 * median_time(fused)
        row["gflops_fused"] = flops(spatial, H, D, kernel, causal) / row["t_fused_ms"] / 1e6
        # natten-mlx's pure backend gathers every neighbourhood as plain ops:
        # past ~1e7 (query, key) pairs per call it needs minutes and GBs.
        pairs = flops(spatial, H, 1, kernel, causal) / 4
        if natten is not None and (natten.get_backend() != "pure" or pairs <= args.natten_max_pairs):
            fn = getattr(natten, f"na{len(spatial)}d")
            ref_fn = lambda: fn(q, k, v, kernel, dilation=dil, is_causal=causal)  # noqa: E731
            ref = ref_fn()
            row["t_natten_ms"] = 1e3 * median_time(ref_fn, iters=1)
        else:
            ref = None
            row["t_natten_ms"] = float("nan")
        # The other's time over ours: above 1, ours is faster.
        row["vs_natten"] = row["t_natten_ms"] / row["t_fused_ms"]
        L = int(np.prod(spatial))
        # Dense attention over 16k tokens needs minutes and ~17 GB on a CPU.
        if not args.no_dense and not (mx.default_device() == mx.cpu and L > 4096):
            qd, kd, vd = (x.reshape(1, L, H, D).transpose(0, 2, 1, 3) for x in (q, k, v))
            dense = lambda: mx.fast.scaled_dot_product_attention(qd, kd, vd, scale=D**-0.5)  # noqa: E731
            row["t_dense_ms"] = 1e3 * median_time(
                dense, iters=1 if mx.default_device() == mx.cpu else 5)
        else:
            row["t_dense_ms"] = float("nan")
        if ref is None:  # tests/test_neighborhood.py checks these semantics
            row["max_abs_diff"], row["agree"] = float("nan"), True
        else:
            err = float(mx.max(mx.abs(out.astype(mx.float32) - ref.astype(mx.float32))))
            row["max_abs_diff"] = err
            row["agree"] = err <= {"float16": 2e-2, "bfloat16": 6e-2, "float32": 1e-4}[args.dtype]
        rows.append(row)
        show(row)

    print(f"times in ms per call; vs_natten = t_natten / t_fused (above 1x: mlx_fused_attn is "
          f"that many times faster); {unit}: of the fused call; '-': not run (natten-mlx "
          f"missing, or its pure backend past --natten-max-pairs; dense past 4096 tokens on a "
          f"CPU or with --no-dense)")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(strict_json.finite_or_null(rows))
    if args.json:
        strict_json.dump({"device": device_name(), "dtype": args.dtype, "mlx": mx.__version__,
                          "mlx_fused_attn": fa.__version__, "natten": natten_name,
                          "date": time.strftime("%Y-%m-%d"), "rows": rows}, args.json)
    if args.plot:
        plot(rows, args.plot, title)
    return 0 if all(r["agree"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
