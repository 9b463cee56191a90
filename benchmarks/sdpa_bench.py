"""mlx_fused_attn against mx.fast.scaled_dot_product_attention and against
unfused MLX ops, on whatever device MLX uses.

The grid and columns follow MLX's own sdpa benchmark (B=1, 32 heads,
qsl = ksl from 32 to 4096, head dims 64/80/128, float16 and float32;
tpose=1 means q, k, v are transposed views of [B, L, H, D]), with columns
for mx.fast and for the speedup over it. Each fused result is checked
against the unfused one. Rows print as they finish.

    python benchmarks/sdpa_bench.py              # quick subset
    python benchmarks/sdpa_bench.py --qsl 1 --ksl 4096 --n-kvh 8 --mask causal
    python benchmarks/sdpa_bench.py --full --csv out.csv --plot out.png
    python benchmarks/sdpa_bench.py --memory     # peak memory, L=16384
    python benchmarks/sdpa_bench.py --metal-variants  # on a Mac: the kernel's variants
    python benchmarks/sdpa_bench.py --kv-bits 4 --qsl 1 --ksl 32768 --n-kvh 8 --hdim 128
        # a quantized K/V cache against mlx-lm's path (benchmarks/quantized_cache.py)
    python benchmarks/sdpa_bench.py --kv-bits 4 --qsl 16384 --prefill-chunk 2048 --n-kvh 8 --hdim 128

Shape flags (--qsl, --ksl, --hdim, --dtype, --tpose) replace the grid by the
product of their values (a flag not given keeps its default); --batch,
--n-qh, --n-kvh and --mask apply to every case.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import time

import mlx.core as mx
import numpy as np

import mlx_fused_attn as fa
from mlx_fused_attn import _strict_json as strict_json

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


MASKS = ["none", "causal", "bool", "additive", "padding"]


def causal_keep(Lq, Lk):
    """[Lq, Lk] bool: query i sees key j iff j <= i + Lk - Lq (bottom-right)."""
    return mx.arange(Lk - Lq, Lk)[:, None] >= mx.arange(Lk)[None]


def left_padding(B, Lk):
    """Each entry's left padding in the batched-generation masks of this and
    gpu_bench.py: entry b padded by b / B of half the keys and 3 b more, so
    that paddings end inside blocks (about a fifth of the keys in all)."""
    return np.arange(B) * (Lk // 2) // B + 3 * np.arange(B)


def make_mask(kind, Lq, Lk, dtype, B=1):
    """The mask argument for `kind`: None, "causal", or the causal pattern as
    a [Lq, Lk] bool array or an additive array (0 or the dtype's lowest
    value), which the op reads broadcast over batch and heads; "padding":
    mlx-lm's batched generation, the causal pattern with each entry's left
    padding hidden ([B, 1, Lq, Lk] bool, left_padding)."""
    if kind == "none":
        return None
    if kind == "causal":
        return "causal"
    keep = causal_keep(Lq, Lk)
    if kind == "padding":
        pad = mx.array(left_padding(B, Lk))
        return keep & (mx.arange(Lk) >= pad[:, None, None, None])
    if kind == "bool":
        return keep
    return mx.where(keep, mx.array(0, dtype), mx.array(mx.finfo(dtype).min, dtype))


def attention_unfused(q, k, v, scale, mask=None):
    """Attention as separate MLX ops, materialising the L_q x L_k scores."""
    B, Hq, Lq, D = q.shape
    Hk, Lk = k.shape[1], k.shape[2]
    q = (q * mx.array(scale, q.dtype)).reshape(B, Hk, Hq // Hk, Lq, D)
    k, v = mx.expand_dims(k, 2), mx.expand_dims(v, 2)
    scores = q @ k.swapaxes(-1, -2)
    lowest = mx.array(mx.finfo(scores.dtype).min, scores.dtype)
    if mask is not None and not isinstance(mask, str) and mask.ndim == 4:
        # [B, H_q or 1, Lq, Lk] against the scores' [B, H_kv, group, Lq, Lk].
        mask = mx.expand_dims(mask, 2) if mask.shape[1] == 1 else mask.reshape(B, Hk, Hq // Hk, Lq, Lk)
    if isinstance(mask, str):
        scores = mx.where(causal_keep(Lq, Lk), scores, lowest)
    elif mask is not None and mask.dtype == mx.bool_:
        scores = mx.where(mask, scores, lowest)
    elif mask is not None:
        scores = scores + mask
    probs = mx.softmax(scores, axis=-1, precise=True)
    return (probs @ v).reshape(B, Hq, Lq, -1)


def flops(B, Hq, Lq, Lk, D, causal=False):
    """4 B H Lq Lk D for the two products; causal counts the visible pairs."""
    if causal:
        pairs = sum(min(Lk, max(0, i + Lk - Lq + 1)) for i in range(Lq))
    else:
        pairs = Lq * Lk
    return 4.0 * B * Hq * pairs * D


def timing_plan(one, min_time=0.3, max_iters=200):
    """(calls per batch, batches) that time_fn times for a call that took
    `one` seconds after its warm-up. Calls of a second or more (unfused ops
    on a CPU) are timed once: (0, 0), the call already made."""
    if one > 1.0:
        return 0, 0
    per_batch = max(1, min(max_iters, int(0.05 / max(one, 1e-6))))
    batches = max(3, min(15, int(min_time / max(one * per_batch, 1e-6))))
    return per_batch, batches


def time_fn(fn, *args):
    """Median seconds per call: warm up, then time batches of calls each ended
    by one synchronisation, so launch overhead overlaps as in real use."""
    mx.eval(fn(*args))
    t0 = time.perf_counter()
    mx.eval(fn(*args))
    one = time.perf_counter() - t0
    per_batch, batches = timing_plan(one)
    if not batches:
        return one
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter()
        outs = [fn(*args) for _ in range(per_batch)]
        mx.eval(outs)
        mx.synchronize()
        samples.append((time.perf_counter() - t0) / per_batch)
    return float(np.median(samples))


def make_inputs(B, Lq, Lk, D, Hq, Hk, dtype, tpose, seed=0):
    key = mx.random.key(seed)
    kq, kk, kv = mx.random.split(key, 3)

    def one(k, H, L):
        if tpose:
            return mx.random.normal((B, L, H, D), key=k).astype(dtype).transpose(0, 2, 1, 3)
        return mx.random.normal((B, H, L, D), key=k).astype(dtype)

    q, k, v = one(kq, Hq, Lq), one(kk, Hk, Lk), one(kv, Hk, Lk)
    mx.eval(q, k, v)
    return q, k, v


def run_case(case, skip_unfused=False):
    """Times one case (a dict of the table's shape columns) three ways; the
    times are in ms."""
    B, Lq, Lk, D = case["B"], case["qsl"], case["ksl"], case["hdim"]
    dtype = DTYPES.get(case["dtype"]) or getattr(mx, case["dtype"])
    q, k, v = make_inputs(B, Lq, Lk, D, case["n_qh"], case["n_kvh"], dtype, case["tpose"])
    mask = make_mask(case["mask"], Lq, Lk, dtype, B)
    if mask is not None and not isinstance(mask, str):
        mx.eval(mask)
    scale = D**-0.5
    fused = lambda q, k, v: fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)  # noqa: E731
    fast = lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)  # noqa: E731
    unfused = lambda q, k, v: attention_unfused(q, k, v, scale, mask)  # noqa: E731
    row = dict(case, fused_path=fa.can_use_fused(q, k, v, scale=scale, mask=mask)[0])
    o_fused = fused(q, k, v)
    row["t_fuse_ms"] = 1e3 * time_fn(fused, q, k, v)
    row["t_fast_ms"] = 1e3 * time_fn(fast, q, k, v)
    if skip_unfused:
        ref, row["t_unfs_ms"] = fast(q, k, v), float("nan")
    else:
        ref = unfused(q, k, v)
        row["t_unfs_ms"] = 1e3 * time_fn(unfused, q, k, v)
    # Speed ratios are the other's time over ours: above 1, ours is faster.
    row["vs_unfs"] = row["t_unfs_ms"] / row["t_fuse_ms"]
    row["vs_fast"] = row["t_fast_ms"] / row["t_fuse_ms"]
    # Only "causal" counts the visible triangle; the bool and additive masks
    # are counted as every (query, key) pair, the work of an arbitrary mask.
    row["gflops_fuse"] = (
        flops(B, case["n_qh"], Lq, Lk, D, case["mask"] == "causal") / row["t_fuse_ms"] / 1e6
    )
    tol = {"float16": 2e-2, "bfloat16": 6e-2, "float32": 2e-4}[case["dtype"]]
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


def flops_unit():
    """The rate unit of the fused column that fits the device: a CPU does
    tens of GFLOP/s, a GPU hundreds of TFLOP/s. Returns (title, divisor of
    GFLOP/s)."""
    return ("GFLOP/s", 1.0) if mx.default_device() == mx.cpu else ("TFLOP/s", 1e3)


def columns():
    return ["B", "qsl", "ksl", "hdim", "n_qh", "n_kvh", "tpose", "dtype", "mask",
            "t_unfs", "t_fuse", "t_fast", "vs_unfs", "vs_fast", flops_unit()[0]]


def print_header():
    print(" ".join(f"{c:>8}" for c in columns()), flush=True)


def print_row(r):
    def ms(t):
        return "skipped" if t != t else f"{t:.3f}"

    def ratio(x):
        return "-" if x != x else f"{x:.2f}x"

    vals = [r["B"], r["qsl"], r["ksl"], r["hdim"], r["n_qh"], r["n_kvh"], r["tpose"],
            r["dtype"], r["mask"], ms(r["t_unfs_ms"]), ms(r["t_fuse_ms"]), ms(r["t_fast_ms"]),
            ratio(r["vs_unfs"]), ratio(r["vs_fast"]),
            f"{r['gflops_fuse'] / flops_unit()[1]:.3g}"]
    flag = "" if r["agree"] else f"  <-- DISAGREES (max |diff| {r['max_abs_diff']:.3g})"
    flag += "" if r["fused_path"] else "  (fallback)"
    print(" ".join(f"{str(v):>8}" for v in vals) + flag, flush=True)


def print_legend(skipped_unfused):
    print(f"times in ms per call; vs_unfs = t_unfs / t_fuse, vs_fast = t_fast / t_fuse (above "
          f"1x: mlx_fused_attn is that many times faster); {flops_unit()[0]}: of the fused call")
    if skipped_unfused:
        print(f"t_unfs skipped: unfused ops past L = {skipped_unfused} on the CPU take minutes "
              "a call (--skip-unfused-above); those rows are checked against mx.fast")


def call_seconds(one):
    """Seconds time_fn spends on a call that takes `one` seconds: the warm-up,
    the first timed call and the batches; run_case adds one call for the
    reference."""
    per_batch, batches = timing_plan(one)
    return one * (3 + per_batch * batches)


def estimate_cpu_seconds(cases, skip_above):
    """Seconds this grid takes on this CPU, where mx.fast and unfused ops
    both materialise the scores: each path's rate in FLOP/s is measured on a
    call of each dtype at L = 512, then each case's calls are counted as
    time_fn makes them. A guide: the load on a shared machine moves it."""
    paths = {
        "fused": lambda q, k, v: fa.scaled_dot_product_attention(q, k, v, scale=0.125),
        "fast": lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125),
        "unfused": lambda q, k, v: attention_unfused(q, k, v, 0.125),
    }
    rate = {}
    for name in {c["dtype"] for c in cases}:
        q, k, v = make_inputs(1, 512, 512, 64, 8, 8, getattr(mx, name), 0)
        for path, fn in paths.items():
            mx.eval(fn(q, k, v))
            t0 = time.perf_counter()
            mx.eval(fn(q, k, v))
            rate[name, path] = flops(1, 8, 512, 512, 64) / (time.perf_counter() - t0)
    seconds = 0.0
    for c in cases:
        work = flops(c["B"], c["n_qh"], c["qsl"], c["ksl"], c["hdim"])
        timed = ["fused", "fast"]
        if max(c["qsl"], c["ksl"]) <= skip_above:
            timed.append("unfused")
        seconds += sum(call_seconds(work / rate[c["dtype"], p]) for p in timed)
    return seconds


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(8, 0.35 * len(rows) + 3), 5.5))
    labels = [f"{r['qsl']}x{r['ksl']}/{r['hdim']}/{r['dtype'].replace('float', 'f')}"
              f"/{'T' if r['tpose'] else 'N'}/{r['mask']}" for r in rows]
    x = np.arange(len(rows))
    # A series that ran for no case (unfused ops past --skip-unfused-above)
    # has neither bars nor a legend entry; a case it skipped has no bar.
    series = [("vs_unfs", "against unfused MLX ops (t_unfs / t_fuse)"),
              ("vs_fast", "against mx.fast (t_fast / t_fuse)")]
    series = [(key, label) for key, label in series if any(r[key] == r[key] for r in rows)]
    width = 0.8 / len(series)
    for i, (key, label) in enumerate(series):
        ax.bar(x + (i - (len(series) - 1) / 2) * width, [r[key] for r in rows], width,
               label=label)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(x, labels, rotation=90, fontsize=7)
    ax.set_xlabel("case: qsl x ksl / head dim / dtype / layout (N: [B, H, L, D]; "
                  "T: transposed view of [B, L, H, D]) / mask")
    ax.set_ylabel("speedup of mlx_fused_attn (log scale; above 1: faster)")
    first = rows[0]
    ax.set_title(f"sdpa_bench, B={first['B']}, {first['n_qh']} query heads, "
                 f"{first['n_kvh']} kv heads, on {device_name()}\n"
                 f"mlx {mx.__version__}, mlx_fused_attn {fa.__version__}, "
                 f"{time.strftime('%Y-%m-%d')}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def duration(seconds):
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def memory_case(L=16384, H=8, D=64, dtype=mx.float16):
    """Peak memory of one fused call, against the size of q, k, v."""
    q, k, v = make_inputs(1, L, L, D, H, H, dtype, 0)
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


# ---------------------------------------------------------------------------
# --metal-variants: the Metal kernel's variants (MLX_FUSED_ATTN_METAL_VARIANT,
# mlx_fused_attn/families/attention/metal/attention_variant.h) against mx.fast and the
# unfused ops, in one run.

METAL_VARIANT_VARIABLE = "MLX_FUSED_ATTN_METAL_VARIANT"
# "" is the default kernel; the tile words take effect at D = 128 in float16
# and bfloat16, stride32 at every head dim.
METAL_VARIANTS = [
    "",
    "stride32",
    "bk32",
    "bk32,stride32",
    "q_threadgroup",
    "q_threadgroup,stride32",
    "q_threadgroup,bk32",
    "q_threadgroup,bk32,stride32",
]
METAL_VARIANT_LENGTHS = [1024, 4096]
METAL_VARIANT_COLUMNS = ["qsl", "ksl", "hdim", "dtype", "mask", "variant", "t_ms", "vs_default",
                         "vs_fast", "vs_unfs", "kernel"]


def fused_pipelines():
    """The fused attention pipelines checked so far in this process (their
    names hold the tiles and the function constants)."""
    return {s["what"] for s in fa.kernel_status() if s["what"].startswith("fa_attention_")}


# (variant, dtype, hdim): the kernel its first call built; later calls of
# the same kernel build nothing new.
_variant_kernels = {}


def variant_kernel(variant, case, built):
    """The kernel the variant's calls of this dtype and head dim run: its
    name (tiles) and "+stride32" where that function constant is on."""
    key = (variant, case["dtype"], case["hdim"])
    if built:
        labels = {p.split("_has_mask_")[0] + ("+stride32" if "_stride32_t" in p else "") for p in built}
        _variant_kernels[key] = " ".join(sorted(labels))
    return _variant_kernels.get(key, "(an earlier variant's)")


def metal_variant_rows(case):
    """One case timed with mx.fast, the unfused ops and each of
    METAL_VARIANTS (the variable set around its calls); rows in ms, each
    fused output checked against the unfused one."""
    B, Lq, Lk, D = case["B"], case["qsl"], case["ksl"], case["hdim"]
    dtype = getattr(mx, case["dtype"])
    q, k, v = make_inputs(B, Lq, Lk, D, case["n_qh"], case["n_kvh"], dtype, case["tpose"])
    mask = make_mask(case["mask"], Lq, Lk, dtype, B)
    if mask is not None and not isinstance(mask, str):
        mx.eval(mask)
    scale = D**-0.5
    fast = lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)  # noqa: E731
    unfused = lambda q, k, v: attention_unfused(q, k, v, scale, mask)  # noqa: E731
    fused = lambda q, k, v: fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)  # noqa: E731
    ref = unfused(q, k, v).astype(mx.float32)
    t_fast, t_unfs = 1e3 * time_fn(fast, q, k, v), 1e3 * time_fn(unfused, q, k, v)
    tol = {"float16": 2e-2, "bfloat16": 6e-2, "float32": 2e-4}[case["dtype"]]
    saved = os.environ.get(METAL_VARIANT_VARIABLE)
    rows = []
    try:
        for variant in METAL_VARIANTS:
            os.environ[METAL_VARIANT_VARIABLE] = variant
            before = fused_pipelines()
            out = fused(q, k, v)
            err = float(mx.max(mx.abs(out.astype(mx.float32) - ref)))
            t = 1e3 * time_fn(fused, q, k, v)
            rows.append(dict(
                case, variant=variant or "default", t_ms=t, t_fast_ms=t_fast, t_unfs_ms=t_unfs,
                vs_default=(rows[0]["t_ms"] if rows else t) / t, vs_fast=t_fast / t, vs_unfs=t_unfs / t,
                kernel=variant_kernel(variant, case, fused_pipelines() - before),
                fused_path=fa.can_use_fused(q, k, v, scale=scale, mask=mask)[0],
                max_abs_diff=err, agree=bool(err <= tol)))
    finally:
        if saved is None:
            os.environ.pop(METAL_VARIANT_VARIABLE, None)
        else:
            os.environ[METAL_VARIANT_VARIABLE] = saved
    return rows


def print_metal_variant_row(r):
    vals = [r["qsl"], r["ksl"], r["hdim"], r["dtype"], r["mask"], r["variant"], f"{r['t_ms']:.3f}",
            f"{r['vs_default']:.2f}x", f"{r['vs_fast']:.2f}x", f"{r['vs_unfs']:.2f}x", r["kernel"]]
    flag = "" if r["agree"] else f"  <-- DISAGREES (max |diff| {r['max_abs_diff']:.3g})"
    flag += "" if r["fused_path"] else "  (fallback)"
    print(" ".join(f"{str(v):>8}" for v in vals) + flag, flush=True)


def run_metal_variants(args):
    """--metal-variants: every case (D = 128 in float16 and bfloat16 at L =
    1024 and 4096 unless shape flags say otherwise) with each variant, on
    Metal only. Returns the exit status."""
    if fa.build_info()["gpu_backend"] != "metal" or mx.default_device() != mx.gpu:
        print(f"--metal-variants: the variants ({METAL_VARIANT_VARIABLE}) are Metal kernels; this "
              f"run is on {device_name()} with the {fa.build_info()['gpu_backend']!r} GPU backend, "
              "so there is nothing to time (run it on a Mac)", flush=True)
        return 0
    if not any(f is not None for f in (args.qsl, args.ksl, args.hdim, args.dtype, args.tpose)):
        args.qsl, args.hdim, args.dtype = METAL_VARIANT_LENGTHS, [128], ["float16", "bfloat16"]
    cases = grid(args)
    print(" ".join(f"{c:>8}" for c in METAL_VARIANT_COLUMNS), flush=True)
    rows = []
    for case in cases:
        for row in metal_variant_rows(case):
            rows.append(row)
            print_metal_variant_row(row)
    print(f"t_ms: ms per call of mlx_fused_attn with {METAL_VARIANT_VARIABLE}=<variant>; vs_default, "
          "vs_fast, vs_unfs: the default kernel's, mx.fast's and the unfused ops' time over it (above "
          "1x: the variant is faster); kernel: the one the variant ran (its tiles; +stride32: "
          "that function constant on)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device_name(), "mlx": mx.__version__,
                       "mlx_fused_attn": fa.__version__, "date": time.strftime("%Y-%m-%d"),
                       "metal_variants": rows}, f, indent=1)
    if args.csv:
        import csv

        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 1 if any(not r["agree"] for r in rows) else 0


def grid(args):
    """The cases: the quick subset, the --full grid, or the product of the
    shape flags; with the per-case flags applied."""
    shape_flags = (args.qsl, args.ksl, args.hdim, args.dtype, args.tpose)
    if any(f is not None for f in shape_flags):
        shapes = [
            (qsl, ksl if ksl is not None else qsl, D, dt, tp)
            for qsl, ksl, D, dt, tp in itertools.product(
                args.qsl or [1024], args.ksl or [None], args.hdim or [64],
                args.dtype or ["float16"], args.tpose or [0])
        ]
    elif args.full:
        shapes = [(L, L, D, dt, tp) for dt in DTYPES for D in HEAD_DIMS
                  for L in LENGTHS for tp in (0, 1)]
    else:
        shapes = [(L, L, D, dt, tp) for L, D, dt, tp in QUICK]
    if args.max_len:
        shapes = [c for c in shapes if max(c[0], c[1]) <= args.max_len]
    n_kvh = args.n_kvh or args.n_qh
    if args.n_qh % n_kvh:
        raise SystemExit(f"--n-qh ({args.n_qh}) must be a multiple of --n-kvh ({n_kvh})")
    return [
        dict(B=args.batch, qsl=qsl, ksl=ksl, hdim=D, n_qh=args.n_qh, n_kvh=n_kvh,
             tpose=tp, dtype=dt, mask=mask)
        for qsl, ksl, D, dt, tp in shapes for mask in args.mask
    ]


def main(argv=None):
    # Here, not at the top: quantized_cache imports this module.
    import quantized_cache

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="the whole MLX grid (slow on a CPU)")
    ap.add_argument("--batch", type=int, default=1, help="B (default 1)")
    ap.add_argument("--qsl", type=int, nargs="+", help="query lengths (default 1024 with other shape flags)")
    ap.add_argument("--ksl", type=int, nargs="+", help="key lengths (default: the query length)")
    ap.add_argument("--hdim", type=int, nargs="+", help="head dims (default 64 with other shape flags)")
    ap.add_argument("--dtype", nargs="+", choices=["float16", "bfloat16", "float32"],
                    help="dtypes (default float16 with other shape flags)")
    ap.add_argument("--tpose", type=int, nargs="+", choices=[0, 1],
                    help="1: q, k, v are transposed views of [B, L, H, D] (default 0)")
    ap.add_argument("--n-qh", type=int, default=HEADS, help=f"query heads (default {HEADS})")
    ap.add_argument("--n-kvh", type=int, help="key/value heads, dividing --n-qh (default: --n-qh)")
    ap.add_argument("--mask", nargs="+", choices=MASKS, default=["none"],
                    help="masks to time: none, causal, the causal pattern as a bool or an "
                         "additive [qsl, ksl] array, or with left padding (default none)")
    ap.add_argument("--max-len", type=int, default=None, help="skip cases with a length above this")
    ap.add_argument("--skip-unfused-above", type=int, default=2048,
                    help="on the CPU, do not time unfused ops past this length (minutes per call)")
    ap.add_argument("--csv", help="write the rows as CSV (times in ms, columns *_ms)")
    ap.add_argument("--json", help="write the rows as JSON (times in ms, keys *_ms; a time "
                    "not measured is null)")
    ap.add_argument("--plot", help="write a speedup chart (PNG)")
    ap.add_argument("--memory", action="store_true", help="report peak memory at L=16384")
    ap.add_argument("--device", choices=["cpu", "gpu"], help="default: MLX's default device")
    ap.add_argument("--metal-variants", action="store_true",
                    help="on a Mac: time each variant of the Metal kernel "
                         "(MLX_FUSED_ATTN_METAL_VARIANT) against mx.fast and the unfused ops "
                         "(default cases: D = 128, float16 and bfloat16, L = 1024 and 4096)")
    quantized_cache.add_kv_options(
        ap, "time attention over a K/V cache quantized to this many bits against mlx-lm's "
            "quantized path, with peak memory (benchmarks/quantized_cache.py; --qsl default 1, "
            "--hdim 128)")  # fmt: skip
    ap.add_argument("--prefill-chunk", type=int,
                    help="with --kv-bits: run the queries as causal prefill chunks of this many")
    ap.add_argument("--skip-mlx-lm", action="store_true",
                    help="with --kv-bits: leave out mlx-lm's path (minutes a call on a CPU)")
    args = ap.parse_args(argv)

    if args.device:
        mx.set_default_device(mx.cpu if args.device == "cpu" else mx.gpu)
    print(f"# sdpa_bench on {device_name()}, mlx {mx.__version__}, mlx_fused_attn "
          f"{fa.__version__}, {time.strftime('%Y-%m-%d')}, {os.environ.get('GIT_COMMIT', '')}"
          .rstrip(", "), flush=True)
    if args.memory:
        memory_case()
        return 0
    if args.metal_variants:
        return run_metal_variants(args)
    if args.kv_bits:
        rows = quantized_cache.run(args)
        if args.json:
            strict_json.dump({"device": device_name(), "mlx": mx.__version__,
                              "mlx_fused_attn": fa.__version__, "date": time.strftime("%Y-%m-%d"),
                              "rows": rows}, args.json)
        return 0 if all(r["agree"] for r in rows) else 1

    cases = grid(args)
    started = time.perf_counter()
    on_cpu = mx.default_device() == mx.cpu
    skip_above = args.skip_unfused_above if on_cpu else float("inf")
    if on_cpu:
        seconds = estimate_cpu_seconds(cases, skip_above)
        print(f"# {len(cases)} case(s). On the CPU, mx.fast and the unfused ops build the "
              f"whole score matrix: about {duration(seconds)} for this grid at this machine's "
              f"speed now (--max-len, --skip-unfused-above or fewer cases shorten it)",
              flush=True)
    print_header()
    rows = []
    skipped = False
    for case in cases:
        skip = max(case["qsl"], case["ksl"]) > skip_above
        skipped |= skip
        rows.append(run_case(case, skip_unfused=skip))
        print_row(rows[-1])
    print_legend(args.skip_unfused_above if skipped else None)
    print(f"took {duration(time.perf_counter() - started)}")
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
        strict_json.dump({"device": device_name(), "mlx": mx.__version__,
                          "mlx_fused_attn": fa.__version__, "date": time.strftime("%Y-%m-%d"),
                          "rows": rows}, args.json)
    if args.plot:
        plot(rows, args.plot)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
