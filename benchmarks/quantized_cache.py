"""sdpa_bench.py --kv-bits: attention over a K/V cache quantized by
mx.quantize (mlx-lm's QuantizedKVCache), three ways, each with its peak
memory:

- ``t_mlxlm``: mlx-lm's ``quantized_scaled_dot_product_attention`` (two
  quantized matmuls around the whole score matrix);
- ``t_qfuse``: this package's ``quantized_scaled_dot_product_attention``;
- ``t_fuse``: this package's float kernel over the same cache unquantized
  (the K and V the cache was quantized from, in the case's dtype).

``--prefill-chunk N`` runs the queries as mlx-lm prefills a prompt: chunks of
N queries, each attending causally to the cache up to its end, the times and
the largest peak summed and taken over the chunks. Peak memory is MLX's
(``mx.get_peak_memory``, reset before each call) above what was allocated
before the call: the inputs are not counted, nor the CPU kernels' own
scratch (outside MLX's allocator).
"""

from __future__ import annotations

import time

import mlx.core as mx

import mlx_fused_attn as fa
from sdpa_bench import DTYPES, duration, flops, time_fn

COLUMNS = ["B", "qsl", "ksl", "chunk", "hdim", "n_qh", "n_kvh", "dtype", "bits", "group"]
# mx.quantize's affine widths and group sizes: what QuantizedKVCache takes.
KV_BITS = (2, 3, 4, 5, 6, 8)
KV_GROUP_SIZES = (32, 64, 128)
KERNEL_COLUMNS = ["k_mlxlm", "k_qfuse", "k_fuse", "k_vs_mlxlm", "k_vs_fuse"]


def add_kv_options(ap, kv_bits_help):
    """The --kv-bits and --kv-group-size options of the benchmarks that
    quantize a K/V cache (sdpa_bench.py, model_bench.py)."""
    ap.add_argument("--kv-bits", type=int, choices=KV_BITS, help=kv_bits_help)
    ap.add_argument("--kv-group-size", type=int, default=64, choices=KV_GROUP_SIZES,
                    help="with --kv-bits: the quantization's group size (default 64)")


def mlx_lm_function():
    try:
        from mlx_lm.models.base import quantized_scaled_dot_product_attention
    except ImportError:
        return None
    return quantized_scaled_dot_product_attention


def peak_above(fn):
    """(fn()'s result, evaluated; MLX's peak memory in bytes during the call
    above what was allocated before it)."""
    mx.synchronize()
    mx.reset_peak_memory()
    before = mx.get_active_memory()
    out = fn()
    mx.eval(out)
    return out, mx.get_peak_memory() - before


def kernel_clock():
    """gpu_bench's CUPTI kernel time (one evaluation a call) where MLX runs
    on CUDA and PyTorch is there to read CUPTI; else None. METHOD.md's clock
    for an NVIDIA GPU: the wall of a 40-us decode is mostly MLX's submission."""
    if mx.default_device() != mx.gpu or not mx.cuda.is_available():
        return None
    try:
        from gpu_bench import kernel_time_us
    except ImportError:
        return None
    return kernel_time_us


def timed(fn, slow_after):
    """(median ms, peak bytes above the inputs) of fn(); a call longer than
    `slow_after` seconds is its own time (mlx-lm's path on a CPU takes
    seconds to minutes a call). On a GPU that call is the second: the first
    also builds and loads the kernels it runs (MLX's CUDA backend compiles
    kernels on first use), which no later call pays: the H100 run's 23 s
    for mlx-lm's 4-bit decode was such a first call, timed alone."""
    if mx.default_device() == mx.gpu:
        mx.eval(fn())
    mx.synchronize()
    t0 = time.perf_counter()
    _, peak = peak_above(fn)
    first = time.perf_counter() - t0
    seconds = first if first > slow_after else time_fn(fn)
    return 1e3 * seconds, peak


def run_case(case, with_mlx_lm=True, slow_after=1.0):
    """Times one case; the times are in ms, the peaks in MiB."""
    B, L_q, L_k, D = case["B"], case["qsl"], case["ksl"], case["hdim"]
    H_q, H_kv, bits, group = case["n_qh"], case["n_kvh"], case["bits"], case["group"]
    dtype = DTYPES.get(case["dtype"]) or getattr(mx, case["dtype"])
    key = mx.random.key(0)
    kq, kk, kv = mx.random.split(key, 3)
    q = mx.random.normal((B, H_q, L_q, D), key=kq).astype(dtype)
    k = mx.random.normal((B, H_kv, L_k, D), key=kk).astype(dtype)
    v = mx.random.normal((B, H_kv, L_k, D), key=kv).astype(dtype)
    qk = tuple(mx.quantize(k, group_size=group, bits=bits))
    qv = tuple(mx.quantize(v, group_size=group, bits=bits))
    mx.eval(q, k, v, qk, qv)
    scale = D**-0.5
    chunk = case["chunk"] or L_q
    # Chunk c: its queries, the cache up to its last query (the last L_q keys
    # are the queries' own), causal.
    chunks = []
    for start in range(0, L_q, chunk):
        end = min(L_q, start + chunk)
        keys = L_k - L_q + end
        mask = "causal" if case["chunk"] else None
        chunks.append((q[:, :, start:end], keys, mask))

    mlx_lm = mlx_lm_function() if with_mlx_lm else None
    paths = {
        "qfuse": lambda qc, n, mask: fa.quantized_scaled_dot_product_attention(
            qc, tuple(x[..., :n, :] for x in qk), tuple(x[..., :n, :] for x in qv),
            scale, mask, group, bits),
        "fuse": lambda qc, n, mask: fa.scaled_dot_product_attention(
            qc, k[..., :n, :], v[..., :n, :], scale=scale, mask=mask),
    }  # fmt: skip
    if mlx_lm is not None:
        # mlx-lm scales its queries in place: it gets a copy each call.
        paths["mlxlm"] = lambda qc, n, mask: mlx_lm(
            qc * 1, tuple(x[..., :n, :] for x in qk), tuple(x[..., :n, :] for x in qv),
            scale, mask, group, bits)  # fmt: skip
    row = dict(case)
    clock = kernel_clock()
    for name in ("mlxlm", "qfuse", "fuse"):
        if name not in paths:
            row[f"t_{name}_ms"] = row[f"mem_{name}_mib"] = row[f"k_{name}_us"] = float("nan")
            continue
        total, peak, kernel = 0.0, 0, 0.0
        for qc, n, mask in chunks:
            call = lambda: paths[name](qc, n, mask)
            t, p = timed(call, slow_after)
            total, peak = total + t, max(peak, p)
            if clock is not None:
                # t is ms: about half a second of calls, 5 to 50.
                kernel += clock(lambda: mx.eval(call()), mx.synchronize, max(5, min(50, int(500 / t))))
        row[f"t_{name}_ms"], row[f"mem_{name}_mib"] = total, peak / 2**20
        row[f"k_{name}_us"] = kernel if clock is not None else float("nan")
    row["vs_mlxlm"] = row["t_mlxlm_ms"] / row["t_qfuse_ms"]
    row["vs_fuse"] = row["t_fuse_ms"] / row["t_qfuse_ms"]
    row["k_vs_mlxlm"] = row["k_mlxlm_us"] / row["k_qfuse_us"]
    row["k_vs_fuse"] = row["k_fuse_us"] / row["k_qfuse_us"]
    row["fused_path"] = fa.quantized_can_use_fused(q, qk, qv, scale, None, group, bits)[0]
    row["qfuse_kernel"] = kernel_of(q, qk, qv, scale, group, bits)
    work = sum(flops(B, H_q, qc.shape[2], n, D, mask == "causal") for qc, n, mask in chunks)
    row["gflops_qfuse"] = work / row["t_qfuse_ms"] / 1e6
    # Agreement on the last chunk, against dequantize-then-attend (mx.fast
    # in float32 over the dequantized cache).
    qc, n, mask = chunks[-1]
    got = paths["qfuse"](qc, n, mask).astype(mx.float32)
    want = mx.fast.scaled_dot_product_attention(
        qc.astype(mx.float32),
        mx.dequantize(*(x[..., :n, :] for x in qk), group_size=group, bits=bits).astype(mx.float32),
        mx.dequantize(*(x[..., :n, :] for x in qv), group_size=group, bits=bits).astype(mx.float32),
        scale=scale, mask=mask)  # fmt: skip
    row["max_abs_diff"] = float(mx.max(mx.abs(got - want)))
    row["agree"] = row["max_abs_diff"] <= {"float16": 2e-2, "bfloat16": 6e-2, "float32": 2e-4}[
        case["dtype"]
    ]
    return row


def kernel_of(q, qk, qv, scale, group, bits):
    """Which kernel the package's plan runs the whole-cache call with: "cpu",
    the GPU tiles (queries x keys, warps), the CUDA chunk policy and the key
    splits ("64x64w4 packed_16b_rows x32"), or "unfused"."""
    plan = fa._ext._quantized_plan(q, qk, qv, scale, None, group, bits)
    if not plan["fused"]:
        return "unfused"
    t = plan["tiles"]
    if not t:
        return "cpu"
    return f"{t['bq']}x{t['bk']}w{t['warps']} {plan['chunks']} x{plan['key_splits']}"


def print_header():
    print("| " + " | ".join(COLUMNS + ["t_mlxlm", "t_qfuse", "t_fuse", "vs_mlxlm", "vs_fuse",
                                       "mem_mlxlm", "mem_qfuse", "mem_fuse"] + KERNEL_COLUMNS
                            + ["qfuse_kernel"])
          + " |")  # fmt: skip
    print("|" + "---|" * (len(COLUMNS) + 9 + len(KERNEL_COLUMNS)), flush=True)


def print_row(r):
    def ms(t):
        return "-" if t != t else f"{t:.3f}"

    def us(t):
        return "-" if t != t else f"{t:.1f}"

    def times(x):
        return "-" if x != x else f"{x:.2f}x"

    def mib(m):
        return "-" if m != m else f"{m:.1f}"

    ratio = "-" if r["vs_mlxlm"] != r["vs_mlxlm"] else f"{r['vs_mlxlm']:.1f}x"
    cells = [str(r[c] if r[c] is not None else "-") for c in COLUMNS] + [
        ms(r["t_mlxlm_ms"]), ms(r["t_qfuse_ms"]), ms(r["t_fuse_ms"]), ratio,
        f"{r['vs_fuse']:.2f}x", mib(r["mem_mlxlm_mib"]), mib(r["mem_qfuse_mib"]),
        mib(r["mem_fuse_mib"]), us(r["k_mlxlm_us"]), us(r["k_qfuse_us"]), us(r["k_fuse_us"]),
        times(r["k_vs_mlxlm"]), times(r["k_vs_fuse"]), r["qfuse_kernel"],
    ]  # fmt: skip
    mark = "" if r["agree"] else f"  <-- disagrees: {r['max_abs_diff']:.3g}"
    print("| " + " | ".join(cells) + " |" + mark, flush=True)


def print_legend():
    print("times in ms (chunked prefill: summed over the chunks); mem_*: peak MiB above the "
          "inputs (chunked: the largest chunk's; the CPU kernels' own scratch, a few key "
          "blocks a thread and split keys' partials, is outside MLX's allocator and not "
          "counted); vs_mlxlm: mlx-lm's time over ours on the quantized cache; vs_fuse: the "
          "float kernel's time over the unquantized cache over ours on the quantized one; k_*: "
          "on CUDA, CUPTI kernel us a call, one evaluation a call (summed over chunks), "
          "k_vs_*: their ratios (ms and x: wall-clock, calls batched); qfuse_kernel: the "
          "plan of the call over the whole cache (GPU tiles, CUDA chunk policy, key splits)")  # fmt: skip


def cases(args):
    ksl = args.ksl or [None]
    return [
        dict(B=args.batch, qsl=qsl, ksl=k if k is not None else qsl, chunk=args.prefill_chunk,
             hdim=D, n_qh=args.n_qh, n_kvh=args.n_kvh or args.n_qh, dtype=dt,
             bits=args.kv_bits, group=args.kv_group_size)
        for qsl in (args.qsl or [1]) for k in ksl for D in (args.hdim or [128])
        for dt in (args.dtype or ["float16"])
    ]  # fmt: skip


def run(args):
    """The --kv-bits table; the rows."""
    started = time.perf_counter()
    if mlx_lm_function() is None:
        print("# mlx-lm is not installed: t_mlxlm is not measured")
    print_header()
    rows = []
    for case in cases(args):
        if case["ksl"] < case["qsl"]:
            raise SystemExit(f"--ksl ({case['ksl']}) must be at least --qsl ({case['qsl']}): "
                             "the queries' own keys are the cache's last ones")  # fmt: skip
        rows.append(run_case(case, with_mlx_lm=not args.skip_mlx_lm))
        print_row(rows[-1])
    print_legend()
    print(f"took {duration(time.perf_counter() - started)}")
    return rows
