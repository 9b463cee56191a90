"""Fused against unfused attention on whatever device MLX uses.

The grid and columns follow MLX's own sdpa benchmark (B=1, 32 heads,
qsl = ksl from 32 to 4096, head dims 64/80/128, float16 and float32;
tpose=1 means q, k, v are transposed views of [B, L, H, D]), with a column for
mx.fast.scaled_dot_product_attention beside ours. Each fused result is checked
against the unfused one.

    python benchmarks/sdpa_bench.py              # quick subset
    python benchmarks/sdpa_bench.py --full --csv out.csv --plot out.png
    python benchmarks/sdpa_bench.py --memory     # peak memory, L=16384
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import mlx.core as mx
import numpy as np

import mlx_fused_attn as fa

HEADS = 32
LENGTHS = [32, 64, 128, 256, 512, 1024, 2048, 4096]
HEAD_DIMS = [64, 80, 128]
DTYPES = {"float16": mx.float16, "float32": mx.float32}
QUICK = [  # (qsl, hdim, dtype, tpose)
    (128, 64, "float16", 0),
    (512, 80, "float16", 1),
    (1024, 64, "float16", 0),
    (1024, 128, "float32", 0),
]


def attention_unfused(q, k, v, scale, mask=None):
    """Attention as separate MLX ops, materialising the L_q x L_k scores."""
    B, Hq, Lq, D = q.shape
    Hk = k.shape[1]
    q = (q * mx.array(scale, q.dtype)).reshape(B, Hk, Hq // Hk, Lq, D)
    k, v = mx.expand_dims(k, 2), mx.expand_dims(v, 2)
    scores = q @ k.swapaxes(-1, -2)
    if mask == "causal":
        Lk = k.shape[-2]
        keep = mx.arange(Lk - Lq, Lk)[:, None] >= mx.arange(Lk)[None]
        scores = mx.where(keep, scores, mx.array(mx.finfo(scores.dtype).min, scores.dtype))
    probs = mx.softmax(scores, axis=-1, precise=True)
    return (probs @ v).reshape(B, Hq, Lq, -1)


def flops(B, Hq, Lq, Lk, D, causal=False):
    """4 B H Lq Lk D for the two products; causal counts the visible pairs."""
    if causal:
        pairs = sum(min(Lk, max(0, i + Lk - Lq + 1)) for i in range(Lq))
    else:
        pairs = Lq * Lk
    return 4.0 * B * Hq * pairs * D


def time_fn(fn, *args, min_time=0.3, max_iters=200):
    """Median seconds per call: warm up, then time batches of calls each ended
    by one synchronisation, so launch overhead overlaps as in real use."""
    mx.eval(fn(*args))
    t0 = time.perf_counter()
    mx.eval(fn(*args))
    one = time.perf_counter() - t0
    per_batch = max(1, min(max_iters, int(0.05 / max(one, 1e-6))))
    # Calls of a second or more (unfused ops on a CPU) get one timed sample.
    batches = 1 if one > 1.0 else max(3, min(15, int(min_time / max(one * per_batch, 1e-6))))
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter()
        outs = [fn(*args) for _ in range(per_batch)]
        mx.eval(outs)
        mx.synchronize()
        samples.append((time.perf_counter() - t0) / per_batch)
    return float(np.median(samples))


def make_inputs(B, L, D, Hq, Hk, dtype, tpose, seed=0):
    key = mx.random.key(seed)
    kq, kk, kv = mx.random.split(key, 3)
    def one(k, H):
        if tpose:
            return mx.random.normal((B, L, H, D), key=k).astype(dtype).transpose(0, 2, 1, 3)
        return mx.random.normal((B, H, L, D), key=k).astype(dtype)
    q, k, v = one(kq, Hq), one(kk, Hk), one(kv, Hk)
    mx.eval(q, k, v)
    return q, k, v


def run_case(B, L, D, Hq, Hk, dtype_name, tpose, mask=None, skip_unfused=False):
    dtype = DTYPES.get(dtype_name) or getattr(mx, dtype_name)
    q, k, v = make_inputs(B, L, D, Hq, Hk, dtype, tpose)
    scale = D**-0.5
    fused = lambda q, k, v: fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)  # noqa: E731
    fast = lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)  # noqa: E731
    unfused = lambda q, k, v: attention_unfused(q, k, v, scale, mask)  # noqa: E731
    row = dict(B=B, qsl=L, ksl=L, hdim=D, n_qh=Hq, n_kvh=Hk, tpose=tpose, dtype=dtype_name,
               mask=mask or "none", fused_path=fa.can_use_fused(q, k, v, scale=scale, mask=mask)[0])
    o_fused = fused(q, k, v)
    row["t_fuse"] = time_fn(fused, q, k, v)
    row["t_fast"] = time_fn(fast, q, k, v)
    if skip_unfused:
        ref, row["t_unfs"] = fast(q, k, v), float("nan")
    else:
        ref = unfused(q, k, v)
        row["t_unfs"] = time_fn(unfused, q, k, v)
    row["diff%"] = 100.0 * (row["t_unfs"] / row["t_fuse"] - 1.0)
    row["tflops_fuse"] = flops(B, Hq, L, L, D, mask == "causal") / row["t_fuse"] / 1e12
    tol = {"float16": 2e-2, "bfloat16": 6e-2, "float32": 2e-4}[dtype_name]
    err = float(mx.max(mx.abs(o_fused.astype(mx.float32) - ref.astype(mx.float32))))
    row["max_abs_diff"] = err
    row["agree"] = bool(err <= tol)
    return row


def device_name():
    dev = mx.default_device()
    if dev == mx.cpu:
        cpu = platform.processor() or ""
        try:
            with open("/proc/cpuinfo") as f:
                cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
        except (OSError, StopIteration):
            pass
        return f"cpu ({cpu}, {os.cpu_count()} cores)"
    try:
        info = mx.device_info()
        return f"gpu ({info.get('device_name', info.get('architecture', '?'))})"
    except Exception:
        return "gpu"


def print_table(rows, file=sys.stdout):
    cols = ["B", "qsl", "ksl", "hdim", "n_qh", "n_kvh", "tpose", "dtype", "mask",
            "t_unfs", "t_fuse", "t_fast", "diff%", "TFLOP/s"]
    print(" ".join(f"{c:>8}" for c in cols), file=file)
    for r in rows:
        vals = [r["B"], r["qsl"], r["ksl"], r["hdim"], r["n_qh"], r["n_kvh"], r["tpose"],
                r["dtype"], r["mask"], f"{r['t_unfs']*1e3:.3f}", f"{r['t_fuse']*1e3:.3f}",
                f"{r['t_fast']*1e3:.3f}", f"{r['diff%']:+.1f}", f"{r['tflops_fuse']:.3f}"]
        flag = "" if r["agree"] else f"  <-- DISAGREES (max |diff| {r['max_abs_diff']:.3g})"
        flag += "" if r["fused_path"] else "  (fallback)"
        print(" ".join(f"{str(v):>8}" for v in vals) + flag, file=file)
    print("times in ms per call; diff% = t_unfs / t_fuse - 1", file=file)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    labels = [f"{r['qsl']}/{r['hdim']}/{r['dtype'][5:]}/{'T' if r['tpose'] else 'N'}" for r in rows]
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["t_unfs"] / r["t_fuse"] for r in rows], 0.4, label="vs unfused")
    ax.bar(x + 0.2, [r["t_fast"] / r["t_fuse"] for r in rows], 0.4, label="vs mx.fast")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, labels, rotation=90, fontsize=7)
    ax.set_ylabel("speedup of mlx_fused_attn")
    ax.set_title(f"sdpa_bench on {device_name()}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def memory_case(L=16384, H=8, D=64, dtype=mx.float16):
    """Peak memory of one fused call, against the size of q, k, v."""
    q, k, v = make_inputs(1, L, D, H, H, dtype, 0)
    mx.synchronize()
    qkv = 3 * q.nbytes
    mx.reset_peak_memory()
    base = mx.get_active_memory()
    t0 = time.perf_counter()
    mx.eval(fa.scaled_dot_product_attention(q, k, v, scale=D**-0.5))
    dt = time.perf_counter() - t0
    peak = mx.get_peak_memory() - base
    scores = 1 * H * L * L * 4  # the fp32 score matrix the unfused path builds
    print(f"peak memory, fused, B=1 H={H} L={L} D={D} {dtype}: {peak / 2**20:.1f} MiB "
          f"above the inputs (q, k, v: {qkv / 2**20:.1f} MiB; ratio to q,k,v "
          f"{(peak + qkv) / qkv:.2f}x counting the inputs); took {dt:.2f} s. "
          f"The unfused path needs the {scores / 2**30:.1f} GiB score matrix.")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="the whole MLX grid (slow on a CPU)")
    ap.add_argument("--causal", action="store_true", help="also time causal masks")
    ap.add_argument("--max-len", type=int, default=None, help="skip sequence lengths above this")
    ap.add_argument("--skip-unfused-above", type=int, default=2048,
                    help="on the CPU, do not time unfused ops past this length (minutes per call)")
    ap.add_argument("--csv", help="write the table as CSV")
    ap.add_argument("--json", help="write the table as JSON")
    ap.add_argument("--plot", help="write a speedup chart (PNG)")
    ap.add_argument("--memory", action="store_true", help="report peak memory at L=16384")
    ap.add_argument("--device", choices=["cpu", "gpu"], help="default: MLX's default device")
    args = ap.parse_args(argv)

    if args.device:
        mx.set_default_device(mx.cpu if args.device == "cpu" else mx.gpu)
    print(f"# sdpa_bench on {device_name()}, mlx {mx.__version__}, "
          f"{time.strftime('%Y-%m-%d')}, {os.environ.get('GIT_COMMIT', '')}".rstrip(", "))
    if args.memory:
        memory_case()
        return 0

    cases = []
    if args.full:
        for dtype in DTYPES:
            for D in HEAD_DIMS:
                for L in LENGTHS:
                    for tpose in (0, 1):
                        cases.append((L, D, dtype, tpose))
    else:
        cases = list(QUICK)
    if args.max_len:
        cases = [c for c in cases if c[0] <= args.max_len]
    masks = [None, "causal"] if args.causal else [None]
    on_cpu = mx.default_device() == mx.cpu
    rows = []
    for L, D, dtype, tpose in cases:
        for mask in masks:
            skip = on_cpu and L > args.skip_unfused_above
            rows.append(run_case(1, L, D, HEADS, HEADS, dtype, tpose, mask, skip_unfused=skip))
            print_table(rows[-1:], file=sys.stderr) if os.environ.get("SDPA_BENCH_VERBOSE") else None
    print_table(rows)
    bad = [r for r in rows if not r["agree"]]
    if bad:
        print(f"{len(bad)} case(s) where fused and unfused disagree (marked above)")
    if args.csv:
        import csv

        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device_name(), "mlx": mx.__version__, "rows": rows}, f, indent=1)
    if args.plot:
        plot(rows, args.plot)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
