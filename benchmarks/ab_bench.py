"""Before and after a change, on an NVIDIA GPU: the fused kernel's time on
the benchmark grid and the workload table for two builds of this package,
in one run, with the 2% rule of a refactor checked row by row.

Two builds cannot live in one Python process, so each round runs one worker
process per build (PYTHONPATH = that build's `pip install --target`
folder), and the rounds alternate the builds (A B A B ...), so that a drift
of the card's clocks over the run falls on both. A row's time for a build is
the minimum over its rounds of the CUPTI kernel time per call (gpu_bench's
`kernel_time_us`, one evaluation a call); the spread of one build over its
rounds is printed beside it as the noise the 2% is read against.

    python benchmarks/ab_bench.py --base /tmp/fa_base --new /tmp/fa_new \\
        [--rounds 3] [--quick] [--out ab.md] [--json ab.json]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

from mlx_fused_attn import _strict_json as strict_json

HERE = os.path.dirname(os.path.abspath(__file__))
TOLERANCE = 1.02


def case_rows(args):
    """(label, Case) for the grid and the workload table, in table order."""
    from gpu_bench import WORKLOAD_CASES, grid_cases

    rows = [("grid", c) for c in grid_cases(args)]
    return rows + [(label, c) for label, c in WORKLOAD_CASES]


def describe(label, c):
    return (f"{label} B={c.B} H={c.Hq}/{c.Hkv} Lq={c.Lq} Lk={c.Lk} D={c.D} "
            f"{c.dtype} {c.mask_label()}")


def worker(args):
    """Times the fused call of every row with the package on PYTHONPATH."""
    import mlx.core as mx

    import mlx_fused_attn as fa  # the build on PYTHONPATH
    from gpu_bench import case_inputs, kernel_time_us

    times = {}
    for label, c in case_rows(args):
        (q, k, v, mask), _ = case_inputs(c, with_torch=False)
        scale = c.D**-0.5
        iters = args.iters or max(10, min(100, int(2e11 / c.work())))
        call = lambda: mx.eval(fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask))
        times[describe(label, c)] = kernel_time_us(call, mx.synchronize, iters)
        del q, k, v, mask
        mx.clear_cache()
    strict_json.dump({"package": fa.__file__, "times": times}, args.worker)


def run_worker(site, args, out):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([site, HERE]))
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", out, *grid_flags(args)]
    subprocess.run(cmd, env=env, check=True)
    with open(out) as f:
        result = json.load(f)
    if not result["package"].startswith(os.path.abspath(site)):
        raise SystemExit(f"the worker for {site} imported {result['package']}: not that build")
    return result["times"]


def grid_flags(args):
    flags = ["--iters", str(args.iters)]
    for name in ("lengths", "dims", "dtypes"):
        if getattr(args, name):
            flags += [f"--{name}", getattr(args, name)]
    flags += ["--quick"] * args.quick + ["--no-large"] * args.no_large
    return flags


def compare(rounds):
    """rounds: {build: [times per round]} -> rows of (case, base, new,
    ratio, base spread, new spread, within tolerance)."""
    rows = []
    for case in rounds["base"][0]:
        best, spread = {}, {}
        for build in ("base", "new"):
            ts = [r[case] for r in rounds[build] if r[case] is not None]
            best[build] = min(ts) if ts else math.nan
            spread[build] = (max(ts) / min(ts) - 1) if ts else math.nan
        ratio = best["new"] / best["base"]
        rows.append((case, best["base"], best["new"], ratio, spread["base"], spread["new"],
                     ratio <= TOLERANCE))
    return rows


def report(rows, out):
    lines = [
        "Fused kernel time per call in us (CUPTI, one evaluation a call), the minimum over "
        "rounds; `spread`: (max - min) / min of one build's rounds. `ok`: new / base <= "
        f"{TOLERANCE}.",
        "",
        "| case | base us | new us | new / base | spread base | spread new | ok |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for case, b, n, r, sb, sn, ok in rows:
        lines.append(f"| {case} | {b:.1f} | {n:.1f} | {r:.3f} | {100 * sb:.1f}% | "
                     f"{100 * sn:.1f}% | {'yes' if ok else 'NO'} |")
    failed = sum(not row[-1] for row in rows)
    lines += ["", f"{len(rows) - failed} of {len(rows)} rows within {TOLERANCE}x."]
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)
    return failed


def main():
    from gpu_bench import add_grid_arguments

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="the base build's pip --target folder")
    ap.add_argument("--new", help="the new build's pip --target folder")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per build")
    ap.add_argument("--iters", type=int, default=0, help="calls per measurement (default: by size)")
    ap.add_argument("--out", default=None, help="also write the markdown table here")
    ap.add_argument("--json", default=None, help="also write every round's times here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    add_grid_arguments(ap)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    if not (args.base and args.new):
        ap.error("--base and --new (two pip --target folders) are required")
    rounds = {"base": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            for build in ("base", "new"):
                print(f"round {i + 1}/{args.rounds}: {build}", file=sys.stderr, flush=True)
                out = os.path.join(tmp, f"{build}{i}.json")
                rounds[build].append(run_worker(getattr(args, build), args, out))
    if args.json:
        strict_json.dump(rounds, args.json)
    sys.exit(1 if report(compare(rounds), args.out) else 0)


if __name__ == "__main__":
    main()
