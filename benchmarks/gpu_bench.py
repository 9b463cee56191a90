"""Attention on an NVIDIA GPU: mlx_fused_attn against mx.fast (cuDNN),
PyTorch's SDPA backends (flash, cuDNN, efficient) and MLX unfused ops.

Two times per provider and case, from the same run:
- kernel: device time of one call, by CUPTI through torch.profiler (it sees
  MLX's kernels too): the time during `--iters` calls that at least one of
  their kernels was running, over `--iters` (kernels that run side by side
  count once);
- wall: wall-clock per call over `--iters` calls with one synchronisation
  (torch: CUDA events; MLX: async_eval, then mx.synchronize).

TFLOP/s count 4 B H Lq Lk D FLOPs (the causal triangle exactly). The floors
come from two ceilings measured at the start: a bf16 8192^3 matmul (torch)
and a device-to-device copy; `floor` is the larger of FLOPs / matmul rate
and (q, k, v, o bytes) / copy bandwidth.

    python benchmarks/gpu_bench.py [--quick | --short | --workload | --routing] [--out results.md]

`--short` times many short sequences (L <= 64, thousands of (batch, head)
pairs), where the short-sequence kernel runs: it adds this package's
general kernel on the same shapes (`fused_general`, MLX_FUSED_ATTN_SHORT_ATTENTION=0)
and reports the fused kernel's bandwidth, (q, k, v, o bytes) / kernel time,
as a share of the measured copy bandwidth. `--workload` times the calls
models make: decoding against a long cache, chunked prefill, GQA and array
masks, with each kernel's distance from its floor and wall-clock against
kernel time, the fused call in both forms of split keys (`fused`: merged
by the last split, MLX_FUSED_ATTN_SPLIT_MERGE=1; `fused_combine`: by the
combine kernel, =0, the default; the same where the keys are unsplit, and
where the call saves the LSE the combine form runs unsplit).
`--persistent` (issue 46) times the producer kernel's static grid against
its persistent one (MLX_FUSED_ATTN_PERSISTENT 0, the default, and 1) beside
mx.fast, on issue 46's rows, chunked prefill and the large grids;
`--small-grid` the same rows under the chooser's tiles against the
small-grid producer tiles (MLX_FUSED_ATTN_SMALL_GRID_PRODUCER 0 and 1).
`--combine` times calls whose keys split (decode, chunked prefill; float
and 4-bit quantized K/V) with the combine in each of its forms
(MLX_FUSED_ATTN_SPLIT_COMBINE) beside the plan's. `--routing` (issue 42)
tunes routing on the workload's calls
and on batched prefill (B 1-8, L 512-8192, random, causal-array, window and
padding bool masks) and head dims 64-256 (`mlx_fused_attn.tune`, the
table in MLX_FUSED_ATTN_TUNED_FILE where set), then times the patched
mx.fast (`auto`) against the fused kernel and mx.fast, and checks each row
within 3% of the faster of the two (`--json` writes the rows); its
`training step` rows time a gradient step instead (benchmarks/training_step.py:
the loss and its gradients with respect to q, k and v, one evaluation a
call), `auto` with the gradient function made inside the patch, not tuned
(tuning times forwards; training calls follow routing.py's training rules).
"""

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from typing import NamedTuple

import mlx.core as mx
import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right
from torch.profiler import ProfilerActivity, profile

import mlx_fused_attn as fa
from mlx_fused_attn import _strict_json as strict_json
from sdpa_bench import left_padding
from training_step import gradient_step

DTYPES = {
    "float16": (mx.float16, torch.float16),
    "bfloat16": (mx.bfloat16, torch.bfloat16),
    "float32": (mx.float32, torch.float32),
}
TORCH_BACKENDS = {
    "torch_flash": SDPBackend.FLASH_ATTENTION,
    "torch_cudnn": SDPBackend.CUDNN_ATTENTION,
    "torch_eff": SDPBackend.EFFICIENT_ATTENTION,
}
PROVIDERS = ["fused", "mx_fast", "torch_flash", "torch_cudnn", "torch_eff", "mlx_unfused"]


def attention_flops(B, H, Lq, Lk, D, causal):
    """4 B H D times the attended (query, key) pairs; causal is
    bottom-right aligned (query i sees keys j <= i + Lk - Lq)."""
    if causal:
        offset = Lk - Lq
        pairs = sum(min(Lk, max(0, i + offset + 1)) for i in range(Lq))
    else:
        pairs = Lq * Lk
    return 4.0 * B * H * D * pairs


def kernel_time_us(call, sync, iters):
    """Device time of one call: the time some kernel of `iters` calls was
    running (the union of their intervals), over `iters`. Kernels that MLX's
    graph runs side by side count once, not summed; on one stream it is
    their sum."""
    call()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            call()
        sync()
    spans = sorted(
        (e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
    )
    busy, end = 0.0, -math.inf
    for start, stop in spans:
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy / iters if busy > 0 else float("nan")


def torch_wall_us(call, iters):
    call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        call()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def out_of_memory(error):
    return "out of memory" in str(error)


def mlx_wall_us(make, iters):
    """Wall us a call, the calls queued; where the queue's temporaries
    (unfused attention's score matrices) overflow the GPU, one call at a time."""
    mx.eval(make())
    mx.synchronize()
    t0 = time.perf_counter()
    try:
        for _ in range(iters):
            mx.async_eval(make())
        mx.synchronize()
    except RuntimeError as e:
        if not out_of_memory(e):
            raise
        mx.synchronize()
        mx.clear_cache()
        t0 = time.perf_counter()
        for _ in range(iters):
            mx.eval(make())
    return (time.perf_counter() - t0) * 1e6 / iters


def measure_ceilings():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    n = 10
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        a @ b
    end.record()
    torch.cuda.synchronize()
    tflops = 2 * 8192**3 * n / (start.elapsed_time(end) * 1e-3) / 1e12
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    y.copy_(x)
    torch.cuda.synchronize()
    start.record()
    for _ in range(n):
        y.copy_(x)
    end.record()
    torch.cuda.synchronize()
    tbps = 2 * x.numel() * n / (start.elapsed_time(end) * 1e-3) / 1e12
    del a, b, x, y
    torch.cuda.empty_cache()
    return tflops, tbps


def mlx_unfused(q, k, v, scale, mask):
    """Scores in full, as models without a fused kernel compute them."""
    if q.shape[1] != k.shape[1]:
        k, v = (mx.repeat(x, q.shape[1] // x.shape[1], axis=1) for x in (k, v))
    s = (q * scale) @ k.swapaxes(-1, -2)
    Lq, Lk = q.shape[2], k.shape[2]
    if isinstance(mask, str):
        mask = mx.arange(Lk - Lq, Lk)[:, None] >= mx.arange(Lk)[None]
    if mask is not None and mask.dtype == mx.bool_:
        s = mx.where(mask, s, mx.array(mx.finfo(s.dtype).min, s.dtype))
    elif mask is not None:
        s = s + mask
    return mx.softmax(s, axis=-1, precise=True) @ v


def measure_mlx(make, iters):
    """(kernel us, wall us) of an MLX call; each measurement ends with a
    synchronisation, so an environment switch set around it holds for every
    evaluation it times."""
    kt = kernel_time_us(lambda: mx.eval(make()), mx.synchronize, iters)
    return kt, mlx_wall_us(make, iters)


def with_switch(variable, value, run):
    """run() with the switch `variable` set to `value` around it."""
    saved = os.environ.get(variable)
    os.environ[variable] = value
    try:
        return run()
    finally:
        if saved is None:
            del os.environ[variable]
        else:
            os.environ[variable] = saved


def measure_with(variable, value, make, iters):
    """measure_mlx with the switch `variable` set to `value` around it."""
    return with_switch(variable, value, lambda: measure_mlx(make, iters))


def switched(variable, value):
    """measure_mlx with the kernel switch `variable` (plan/kernel_switches.h)
    set to `value`."""

    def measure(make, iters):
        return measure_with(variable, value, make, iters)

    return measure


# The fused calls measured with a kernel path switched: the general kernel
# in place of the short one; split keys merged by the combine kernel, and
# (the workload's `fused`, opt-in: slower at decode) by the last
# split.
SWITCHED = {
    "fused_general": switched("MLX_FUSED_ATTN_SHORT_ATTENTION", "0"),
    "fused_combine": switched("MLX_FUSED_ATTN_SPLIT_MERGE", "0"),
}
MERGED_IN_KERNEL = switched("MLX_FUSED_ATTN_SPLIT_MERGE", "1")


class Case:
    """One attention call: q [B, Hq, Lq, D], k and v [B, Hkv, Lk, D], and a
    mask: None, "causal", or an array mask "add" / "bool" of shape
    [1, mask_heads, Lq, Lk] broadcast over the batch (and the heads when
    mask_heads is 1), as models build them. window: the array mask is
    mlx-lm's causal mask (create_causal_mask) with that window (0: none)
    in place of a random one. alibi: the additive mask is ALiBi's causal
    bias (BLOOM, MPT), a different value for every key distance. padding:
    the bool mask [B, 1, Lq, Lk] of mlx-lm's batched generation
    (BatchKVCache: causal, and the keys of each prompt's left padding
    hidden, sdpa_bench.left_padding); in prefill a padded query's row hides
    every key."""

    def __init__(self, B, Hq, Lq, D, dtype, mask=None, Hkv=None, Lk=None, mask_heads=1, window=None,
                 alibi=False, padding=False):
        self.B, self.Hq, self.Lq, self.D, self.dtype = B, Hq, Lq, D, dtype
        self.Hkv = Hkv or Hq
        self.Lk = Lk or Lq
        self.mask, self.mask_heads, self.window = mask, mask_heads, window
        self.alibi = alibi
        self.padding = padding

    @property
    def causal(self):
        return self.mask == "causal"

    def mask_label(self):
        if self.mask in (None, "causal"):
            return self.mask or "none"
        if self.padding:
            return f"{self.mask} causal, left padding [B,1,Lq,Lk]"
        kind = "" if self.window is None else (f" window {self.window}" if self.window else " causal")
        kind = " ALiBi causal" if self.alibi else kind
        return f"{self.mask}{kind} [1,{self.mask_heads},Lq,Lk]"

    def flops(self):
        return attention_flops(self.B, self.Hq, self.Lq, self.Lk, self.D, self.causal)

    def nbytes(self):
        """Bytes a kernel must move: q and o once, k and v once per KV head,
        the array mask once."""
        item = DTYPES[self.dtype][0].size
        n = item * 2 * self.B * (self.Hq * self.Lq + self.Hkv * self.Lk) * self.D
        if self.mask in ("add", "bool"):
            n += (self.B if self.padding else self.mask_heads) * self.Lq * self.Lk * (
                1 if self.mask == "bool" else item)
        return n

    def work(self):
        return self.B * self.Hq * self.Lq * self.Lk * self.D


def host_mask(case, rng):
    """The array mask as NumPy: every query keeps its diagonal key visible
    (no empty rows, where the providers' conventions differ) and about a
    quarter of the others masked; or mlx-lm's causal mask (case.window),
    with left padding (case.padding)."""
    shape = (1, case.mask_heads, case.Lq, case.Lk)
    i = np.arange(case.Lq)[:, None] + case.Lk - case.Lq
    j = np.arange(case.Lk)[None, :]
    if case.padding:
        # mlx_lm.models.base.create_causal_mask(left_padding=...)
        pad = left_padding(case.B, case.Lk)
        keep = (j <= i)[None, None] & (j[None, None] >= pad[:, None, None, None])
        return keep if case.mask == "bool" else np.where(keep, 0.0, -np.inf).astype(np.float32)
    if case.alibi:
        slopes = 2.0 ** (-8.0 * np.arange(1, case.mask_heads + 1) / case.mask_heads)
        bias = -slopes[:, None, None] * (i - j)
        return np.where(j <= i, bias, -np.inf)[None].astype(np.float32)
    if case.window is None:
        keep = rng.random(shape) > 0.25
        rows = np.arange(case.Lq)
        keep[..., rows, np.minimum(rows + case.Lk - case.Lq, case.Lk - 1)] = True
    else:
        # mlx_lm.models.base.create_causal_mask, bottom-right aligned
        keep = (j <= i) & ((j > i - case.window) if case.window else True)
        keep = np.broadcast_to(keep, shape)
    if case.mask == "bool":
        return keep
    # -inf as a model's finfo.min becomes in fp16: a hidden block.
    hidden = -1e4 if case.window is None else -np.inf
    return np.where(keep, 0.0, hidden).astype(np.float32)


def case_inputs(case, with_torch=True):
    """The case's (q, k, v, mask) for MLX, evaluated, and for torch (None
    without with_torch); the same values for every run of the case."""
    mdt, tdt = DTYPES[case.dtype]
    c = case
    seed = c.Lq * c.D + c.Lk
    rng = np.random.default_rng(seed)
    shapes = [(c.B, h, n, c.D) for h, n in ((c.Hq, c.Lq), (c.Hkv, c.Lk), (c.Hkv, c.Lk))]
    if with_torch:
        host = [rng.standard_normal(shape, dtype=np.float32) for shape in shapes]
        q, k, v = (mx.array(x).astype(mdt) for x in host)
    else:
        # Drawn on the device: NumPy took seconds for a B=8 L=8192 row's GBs.
        keys = mx.random.split(mx.random.key(seed), 3)
        q, k, v = (mx.random.normal(shape, key=key).astype(mdt) for shape, key in zip(shapes, keys))
    mask, m = ("causal" if c.causal else None), None
    if c.mask in ("add", "bool"):
        m = host_mask(c, rng)
        mask = mx.array(m) if c.mask == "bool" else mx.array(m).astype(mdt)
    mx.eval(q, k, v, *([] if mask is None or isinstance(mask, str) else [mask]))
    if not with_torch:
        return (q, k, v, mask), None
    tq, tk, tv = (torch.from_numpy(x).to("cuda", tdt) for x in host)
    tmask = None
    if m is not None:
        tmask = torch.from_numpy(m).to("cuda") if c.mask == "bool" else torch.from_numpy(m).to("cuda", tdt)
    return (q, k, v, mask), (tq, tk, tv, tmask)


def run_case(case, iters, ceilings, skip_unfused, general=False, combine=False):
    c = case
    scale = c.D**-0.5
    (q, k, v, mask), (tq, tk, tv, tmask) = case_inputs(c)

    results = {}
    mlx_calls = {
        "fused": lambda: fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask),
        "mx_fast": lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask),
    }
    if not skip_unfused:
        mlx_calls["mlx_unfused"] = lambda: mlx_unfused(q, k, v, scale, mask)
    if general:
        mlx_calls["fused_general"] = mlx_calls["fused"]
    if combine:
        mlx_calls["fused_combine"] = mlx_calls["fused"]
    for name, make in mlx_calls.items():
        try:
            measure = MERGED_IN_KERNEL if combine and name == "fused" else SWITCHED.get(name, measure_mlx)
            results[name] = measure(make, iters)
        except Exception as e:  # out of memory and the like: reported, not fatal
            results[name] = (float("nan"), float("nan"))
            print(f"  {name}: {type(e).__name__}: {str(e)[:80]}", file=sys.stderr)
    for name, backend in TORCH_BACKENDS.items():
        if case.dtype == "float32" and name != "torch_eff":
            continue  # flash and cuDNN take fp16/bf16 only
        # torch's is_causal is top-left aligned; MLX's causal is bottom-right.
        causal_mask = causal_lower_right(c.Lq, c.Lk) if c.causal else tmask
        def call(backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(
                    tq, tk, tv, attn_mask=causal_mask, scale=scale, enable_gqa=c.Hkv != c.Hq)
        try:
            results[name] = (kernel_time_us(call, torch.cuda.synchronize, iters),
                             torch_wall_us(call, iters))
        except Exception as e:  # a backend that refuses the call (masks, GQA)
            results[name] = (float("nan"), float("nan"))
            print(f"  {name}: {type(e).__name__}: {str(e)[:80]}", file=sys.stderr)

    # The fused answer (each form timed) against mx.fast on a slice, so that a
    # fast wrong kernel cannot hide in the table.
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)

    def fused_err():
        got = fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
        return mx.abs(got[:, :2].astype(mx.float32) - want[:, :2].astype(mx.float32)).max().item()

    err = fused_err()
    if combine:
        err = max(err, with_switch("MLX_FUSED_ATTN_SPLIT_MERGE", "1", fused_err))

    tflops_ceiling, tbps_ceiling = ceilings
    floor_us = max(c.flops() / (tflops_ceiling * 1e12), c.nbytes() / (tbps_ceiling * 1e12)) * 1e6
    del q, k, v, tq, tk, tv, mask, tmask
    torch.cuda.empty_cache()
    mx.clear_cache()
    return results, floor_us, err


def fmt_us(x):
    return "-" if x is None or math.isnan(x) else f"{x:.1f}"


def timing_cells(res, providers):
    """"kernel (wall)" for each provider, "-" where it did not run."""
    return [
        f"{fmt_us(k)} ({fmt_us(w)})"
        for k, w in (res.get(p, (float("nan"), float("nan"))) for p in providers)
    ]


def ratio_cells(res, providers, fused_us):
    """Each provider's kernel time over the fused kernel's."""
    ratios = (res.get(p, (float("nan"),))[0] / fused_us for p in providers)
    return ["-" if math.isnan(r) else f"{r:.2f}" for r in ratios]


class Report:
    """A markdown table printed a row at a time as it is measured (a long
    run shows progress), and written whole to `out` at the end."""

    def __init__(self, out, ceilings, legend, columns, text_columns=0):
        self.out = out
        self.lines = [
            f"Ceilings: bf16 matmul {ceilings[0]:.0f} TFLOP/s, copy {ceilings[1]:.2f} TB/s. "
            f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; MLX {mx.__version__}.",
            "",
            legend,
            "",
            "| " + " | ".join(columns) + " |",
            "|" + "---|" * text_columns + "---:|" * (len(columns) - text_columns),
        ]
        print("\n".join(self.lines), flush=True)

    def row(self, cells):
        line = "| " + " | ".join(cells) + " |"
        self.lines.append(line)
        print(line, flush=True)

    def close(self):
        if self.out:
            with open(self.out, "w") as f:
                f.write("\n".join(self.lines) + "\n")


def grid_cases(args):
    """The benchmark grid: B=1 H=32 over lengths, head dims and dtypes, and
    the large B=4 L=8192 bf16 cases."""

    def ints(text, default):
        return default if text is None else [int(x) for x in text.split(",")]

    cases = []
    lengths = ints(args.lengths, [512, 4096] if args.quick else [32, 64, 128, 256, 512, 1024, 2048, 4096])
    dims = ints(args.dims, [64, 128] if args.quick else [64, 80, 128])
    for dtype_name in args.dtypes.split(",") if args.dtypes else ["float16", "float32"]:
        for D in dims:
            for L in lengths:
                cases.append(Case(1, 32, L, D, dtype_name))
    for D in [] if args.no_large else [64, 128]:
        for mask in [None, "causal"]:
            cases.append(Case(4, 32, 8192, D, "bfloat16", mask))
    return cases


def add_grid_arguments(ap):
    ap.add_argument("--quick", action="store_true", help="a few cases only")
    ap.add_argument("--lengths", default=None, help="L of the B=1 cases, as 512,4096")
    ap.add_argument("--dims", default=None, help="head dims of the B=1 cases, as 64,128")
    ap.add_argument("--dtypes", default=None, help="dtypes of the B=1 cases, as float16")
    ap.add_argument("--no-large", action="store_true", help="without the B=4 L=8192 cases")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_grid_arguments(ap)
    ap.add_argument("--short", action="store_true", help="many short sequences (see above)")
    ap.add_argument("--workload", action="store_true",
                    help="the calls models make: decode, chunked prefill, array masks, GQA")
    ap.add_argument("--routing", action="store_true",
                    help="tune, then auto against fused and mx.fast (issue 42; see above)")
    ap.add_argument("--persistent", action="store_true",
                    help="the producer kernel's static against its persistent grid (issue 46)")
    ap.add_argument("--small-grid", action="store_true",
                    help="the chooser's tiles against the small-grid producer tiles (issue 46)")
    ap.add_argument("--combine", action="store_true",
                    help="split-key calls with the combine in each form (see above)")
    ap.add_argument("--calls", default=None,
                    help="with --workload or --routing, only these calls, as 'batched decode,no mask'")
    ap.add_argument("--json", default=None, help="with --routing, also write the rows as JSON")
    ap.add_argument("--iters", type=int, default=0, help="calls per measurement (default: by size)")
    ap.add_argument("--out", default=None, help="also write the markdown table here")
    args = ap.parse_args()
    cases = grid_cases(args)
    if args.short:
        short_table(args)
        return
    if args.workload:
        workload_table(args)
        return
    if args.routing:
        routing_table(args)
        return
    if args.combine:
        combine_table(args)
        return
    for name, table in SWITCH_TABLES.items():
        if getattr(args, name):
            switch_table(args, table)
            return

    ceilings = measure_ceilings()
    ratios = ["mx_fast", "torch_flash", "torch_cudnn", "torch_eff"]
    report = Report(
        args.out, ceilings,
        "Kernel time per call in us (CUPTI); wall-clock per call in parentheses. "
        "`x flash` etc.: competitor kernel time / fused kernel time (>1: fused is faster).",
        ["B", "H", "L", "D", "dtype", "causal", "fused", "TFLOP/s", "floor us", "% of floor",
         *PROVIDERS[1:], "x cudnn(mx)", "x flash", "x cudnn(torch)", "x eff", "max err vs mx.fast"],
    )
    for c in cases:
        iters = args.iters or max(3, min(100, int(2e11 / c.work())))
        res, floor_us, err = run_case(
            c, iters, ceilings, skip_unfused=(c.B * c.Hq * c.Lq * c.Lk > 2**31)
        )
        fk, fw = res["fused"]
        report.row([str(c.B), str(c.Hq), str(c.Lq), str(c.D), c.dtype, "yes" if c.causal else "no",
                    f"{fmt_us(fk)} ({fmt_us(fw)})", f"{c.flops() / (fk * 1e-6) / 1e12:.0f}",
                    f"{floor_us:.1f}", f"{100 * floor_us / fk:.0f}",
                    *timing_cells(res, PROVIDERS[1:]), *ratio_cells(res, ratios, fk), f"{err:.2e}"])
    report.close()


# The two targets of the short kernel first
# (B=1000 H=80 L=32 D=64 and B=1000 H=160 L=48 D=32, fp16), then the other
# capacities, dtypes and causal, and one small batch (launch-bound).
SHORT_CASES = [
    Case(1000, 80, 32, 64, "float16"),
    Case(1000, 160, 48, 32, "float16"),
    Case(1000, 80, 32, 64, "bfloat16"),
    Case(1000, 80, 32, 64, "float16", "causal"),
    Case(1000, 80, 32, 64, "float32"),
    Case(2000, 64, 16, 64, "float16"),
    Case(1000, 40, 64, 128, "float16"),
    Case(1, 8, 64, 64, "float16"),
]
SHORT_PROVIDERS = ["fused_general", "mx_fast", "torch_flash", "torch_cudnn", "torch_eff"]


def short_table(args):
    ceilings = measure_ceilings()
    report = Report(
        args.out, ceilings,
        "Kernel time per call in us (CUPTI); wall-clock per call in parentheses. `fused`: "
        "the short-sequence kernel; `fused_general`: this package's general kernel "
        "(MLX_FUSED_ATTN_SHORT_ATTENTION=0). TB/s: (q, k, v, o bytes) / fused kernel time; "
        "`x ...`: that provider's kernel time / fused kernel time.",
        ["B", "H", "L", "D", "dtype", "causal", "fused", "TB/s", "% of copy", "floor us",
         *SHORT_PROVIDERS, "x general", "x cudnn(mx)", "x flash", "x cudnn(torch)", "x eff",
         "max err vs mx.fast"],
    )
    for c in SHORT_CASES:
        iters = args.iters or max(10, min(100, int(2e11 / c.work())))
        res, floor_us, err = run_case(c, iters, ceilings, skip_unfused=True, general=True)
        fk, fw = res["fused"]
        tbps = c.nbytes() / (fk * 1e-6) / 1e12
        report.row([str(c.B), str(c.Hq), str(c.Lq), str(c.D), c.dtype, "yes" if c.causal else "no",
                    f"{fmt_us(fk)} ({fmt_us(fw)})", f"{tbps:.2f}", f"{100 * tbps / ceilings[1]:.0f}",
                    f"{floor_us:.1f}", *timing_cells(res, SHORT_PROVIDERS),
                    *ratio_cells(res, SHORT_PROVIDERS, fk), f"{err:.2e}"])
    report.close()


# The calls models make (issue 16): decoding against a long cache, chunked
# prefill and speculative verification with GQA (32 query heads over 8 KV
# heads), a grid under one wave without a long cache (which routing.py
# leaves to cuDNN), array masks as mlx-lm passes them, and a GQA causal
# prefill.
WORKLOAD_CASES = [
    ("decode", Case(1, 32, 1, 128, "bfloat16", Hkv=8, Lk=32768)),
    ("decode", Case(1, 32, 1, 128, "bfloat16", Hkv=8, Lk=4096)),
    ("decode B=8", Case(8, 32, 1, 128, "bfloat16", Hkv=8, Lk=32768)),
    ("decode B=8", Case(8, 32, 1, 128, "bfloat16", Hkv=8, Lk=4096)),
    ("chunked prefill", Case(1, 32, 128, 128, "bfloat16", "causal", Hkv=8, Lk=32768)),
    ("chunked prefill B=8", Case(8, 32, 128, 128, "bfloat16", "causal", Hkv=8, Lk=4096)),
    ("chunked prefill", Case(1, 32, 128, 128, "bfloat16", "causal", Hkv=8, Lk=4096)),
    ("batched decode", Case(8, 32, 1, 128, "bfloat16", "bool", Hkv=8, Lk=4096, padding=True)),
    ("batched decode", Case(8, 32, 1, 128, "bfloat16", "bool", Hkv=8, Lk=32768, padding=True)),
    ("batched prefill", Case(8, 32, 512, 128, "bfloat16", "bool", Hkv=8, padding=True)),
    ("speculative verify", Case(1, 32, 16, 128, "bfloat16", "causal", Hkv=8, Lk=4096)),
    ("speculative verify", Case(1, 32, 16, 128, "bfloat16", "causal", Hkv=8, Lk=32768)),
    ("small grid", Case(1, 8, 1024, 128, "bfloat16")),
    ("array mask", Case(1, 32, 2048, 64, "float16", "add")),
    ("array mask", Case(1, 32, 2048, 64, "float16", "add", mask_heads=32)),
    ("array mask", Case(1, 32, 2048, 64, "float16", "bool")),
    ("array mask", Case(1, 32, 2048, 64, "float16", "bool", mask_heads=32)),
    ("array mask", Case(1, 32, 2048, 64, "float16", "bool", window=0)),
    ("array mask", Case(1, 32, 2048, 64, "float16", "add", window=0)),
    ("array mask", Case(1, 32, 2048, 64, "float16", "bool", window=512)),
    ("array mask", Case(1, 32, 2048, 64, "float16", "add", window=512)),
    ("array mask", Case(1, 32, 2048, 64, "float16", "add", mask_heads=32, alibi=True)),
    ("causal", Case(1, 32, 2048, 64, "float16", "causal")),
    ("no mask", Case(1, 32, 2048, 64, "float16")),
    ("GQA prefill", Case(1, 32, 2048, 128, "bfloat16", "causal", Hkv=8)),
]
WORKLOAD_PROVIDERS = ["fused_combine", "mx_fast", "torch_flash", "torch_cudnn", "torch_eff", "mlx_unfused"]


def workload_table(args):
    ceilings = measure_ceilings()
    report = Report(
        args.out, ceilings,
        "Kernel time per call in us (CUPTI, one evaluation a call); wall-clock per call "
        "in parentheses (a stream of async_eval calls, one synchronisation). "
        "`floor`: the larger of FLOPs / matmul rate and (q, k, v, o, mask bytes) / copy "
        "bandwidth. `fused`: split keys merged by the last split (MLX_FUSED_ATTN_SPLIT_MERGE=1); "
        "`fused_combine`: by the combine kernel (=0, the default). "
        "`x mx.fast`: mx.fast kernel time / fused kernel time (>1: fused is faster).",
        ["call", "B", "Hq/Hkv", "Lq", "Lk", "D", "dtype", "mask", "fused", "floor us",
         "% of floor", *WORKLOAD_PROVIDERS, "x mx.fast", "wall/kernel fused",
         "wall/kernel mx.fast", "max err vs mx.fast"],
        text_columns=1,
    )
    calls = args.calls.split(",") if args.calls else None
    for label, c in WORKLOAD_CASES:
        if calls and label not in calls:
            continue
        iters = args.iters or max(10, min(100, int(2e11 / c.work())))
        res, floor_us, err = run_case(c, iters, ceilings, skip_unfused=c.B * c.Hq * c.Lq * c.Lk > 2**31,
                                      combine=True)
        fk, fw = res["fused"]
        mk, mw = res["mx_fast"]
        report.row([label, str(c.B), f"{c.Hq}/{c.Hkv}", str(c.Lq), str(c.Lk), str(c.D), c.dtype,
                    c.mask_label(), f"{fmt_us(fk)} ({fmt_us(fw)})", f"{floor_us:.1f}",
                    f"{100 * floor_us / fk:.0f}", *timing_cells(res, WORKLOAD_PROVIDERS),
                    f"{mk / fk:.2f}", f"{fw / fk:.2f}", f"{mw / mk:.2f}", f"{err:.2e}"])
    report.close()



# Issue 46's forward rows, and the large grids that already run at cuDNN's
# speed (a switched path must not slow them).
SWITCH_TABLE_CASES = [
    Case(8, 32, 512, 128, "bfloat16", "causal", Hkv=8),
    Case(4, 32, 1024, 128, "bfloat16", "causal", Hkv=8),
    Case(1, 32, 512, 128, "bfloat16", "causal", Hkv=8),
    Case(2, 32, 2048, 128, "bfloat16", "causal", Hkv=8),
    Case(1, 32, 1024, 64, "float16"),
    Case(1, 32, 2048, 128, "float16"),
    Case(1, 32, 2048, 96, "float16"),
    Case(1, 32, 2048, 64, "float16", "add"),
    Case(8, 32, 512, 128, "bfloat16", Hkv=8),
    Case(8, 32, 128, 128, "bfloat16", "causal", Hkv=8, Lk=4096),
    Case(1, 32, 4096, 128, "float16"),
    Case(1, 32, 4096, 128, "float16", "causal"),
    Case(4, 32, 8192, 128, "bfloat16"),
    Case(4, 32, 8192, 128, "bfloat16", "causal"),
]


class SwitchTable(NamedTuple):
    """An opt-in path of issue 46 (plan/kernel_switches.h) timed both ways."""

    variable: str
    off: str  # the providers' names: the switch "0" (the default) and "1"
    on: str
    what: str  # what "1" takes, for the legend


SWITCH_TABLES = {
    "persistent": SwitchTable(
        "MLX_FUSED_ATTN_PERSISTENT", "fused_static", "fused_persistent",
        "the producer kernel's persistent grid (plan/persistent_grid.h's rule: past one "
        "wave and up to kPersistentMaxWaves)"),
    "small_grid": SwitchTable(
        "MLX_FUSED_ATTN_SMALL_GRID_PRODUCER", "fused_chooser", "fused_small_grid",
        "the small-grid producer tiles on small grids (plan/small_grid.h's rule)"),
}


# Calls whose keys split, as (case, K/V bits: 0 for float): decode at B=1
# and 8 (GQA packed as rows: a few rows over many splits, or more rows
# over fewer), a few queries, and chunked prefill (many rows over 4 splits).
COMBINE_CASES = [
    (Case(1, 32, 1, 128, "bfloat16", Hkv=8, Lk=32768), 0),
    (Case(1, 32, 1, 128, "bfloat16", Hkv=8, Lk=32768), 4),
    (Case(1, 32, 1, 128, "bfloat16", Hkv=8, Lk=4096), 0),
    (Case(1, 32, 1, 128, "bfloat16", Hkv=8, Lk=4096), 4),
    (Case(8, 32, 1, 128, "bfloat16", Hkv=8, Lk=32768), 0),
    (Case(8, 32, 1, 128, "bfloat16", Hkv=8, Lk=32768), 4),
    (Case(8, 32, 1, 128, "bfloat16", Hkv=8, Lk=4096), 0),
    (Case(1, 32, 1, 64, "float16", Lk=16384), 0),
    (Case(1, 32, 16, 128, "bfloat16", "causal", Hkv=8, Lk=32768), 0),
    (Case(1, 32, 128, 128, "bfloat16", "causal", Hkv=8, Lk=4096), 0),
    (Case(8, 32, 128, 128, "bfloat16", "causal", Hkv=8, Lk=4096), 0),
]
COMBINE_FORMS = ["one_element", "grouped", "row"]


def combine_table(args):
    """The combine of split keys in each form (MLX_FUSED_ATTN_SPLIT_COMBINE;
    kernels/split_combine_form.h): each call's kernel time, split kernel and
    combine, under each form, the plan's marked; the forms' spread is the
    combine's."""
    ceilings = measure_ceilings()
    report = Report(
        args.out, ceilings,
        "Kernel time per call in us (CUPTI, one evaluation a call: the split kernel and "
        "the combine); wall-clock per call in parentheses. `bits`: 4 for a 4-bit (groups "
        "of 64) K/V cache (quantized_scaled_dot_product_attention), - for float. "
        "`plan`: the form the plan picks; `x best`: the plan's time / the fastest form's; "
        "`mx_fast`: mx.fast (cuDNN) on the float cache, `x mx.fast` its time / the plan's.",
        ["B", "Hq/Hkv", "Lq", "Lk", "D", "dtype", "mask", "bits", "splits", "plan",
         *COMBINE_FORMS, "x best", "mx_fast", "x mx.fast", "max err vs one_element"],
    )
    for c, bits in COMBINE_CASES:
        iters = args.iters or 100
        scale = c.D**-0.5
        (q, k, v, mask), _ = case_inputs(c, with_torch=False)
        if bits:
            qk = tuple(mx.quantize(k, group_size=64, bits=bits))
            qv = tuple(mx.quantize(v, group_size=64, bits=bits))
            mx.eval(qk, qv)
            def call():
                return fa.quantized_scaled_dot_product_attention(q, qk, qv, scale, mask, 64, bits)
            plan = fa._ext._quantized_plan(q, qk, qv, scale, mask, 64, bits)
            splits, plan = plan["key_splits"], plan["combine_form"]
        else:
            def call():
                return fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
            summary = fa.plan_summary(q, k, v, scale=scale, mask=mask)
            splits, plan = summary.key_splits, summary.combine_form
        res = {form: measure_with("MLX_FUSED_ATTN_SPLIT_COMBINE", form, call, iters)
               for form in COMBINE_FORMS}
        outs = {form: with_switch("MLX_FUSED_ATTN_SPLIT_COMBINE", form, call)
                for form in COMBINE_FORMS}
        err = max(mx.abs(outs[f].astype(mx.float32) - outs["one_element"].astype(mx.float32))
                  .max().item() for f in COMBINE_FORMS)
        best = min(res[f][0] for f in COMBINE_FORMS)
        fast = measure_mlx(
            lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask), iters)
        plan = plan or "-"
        report.row([str(c.B), f"{c.Hq}/{c.Hkv}", str(c.Lq), str(c.Lk), str(c.D), c.dtype,
                    c.mask_label(), str(bits or "-"), str(splits), plan,
                    *timing_cells(res, COMBINE_FORMS),
                    f"{res[plan][0] / best:.2f}" if plan in res else "-",
                    *timing_cells({"mx_fast": fast}, ["mx_fast"]),
                    f"{fast[0] / res[plan][0]:.2f}" if plan in res else "-", f"{err:.2e}"])
        del q, k, v, mask
        mx.clear_cache()
    report.close()


def tiles_label(tiles):
    """A plan's tiles in short: bq x bk, `p` with a producer warpgroup, `P`
    on a persistent grid; `-` for the short kernel's."""
    if "bq" not in tiles:
        return "-"
    marks = ("p" if tiles.get("producer") else "") + ("P" if tiles.get("persistent") else "")
    return f"{tiles['bq']}x{tiles['bk']}{marks}"


def switch_table(args, table):
    """Issue 46: the fused kernel with the opt-in switch `table.variable` "0"
    (the default) and "1", beside mx.fast: the table that ranks an opt-in
    path. Where neither form changes the call's plan both run the
    same kernel."""
    ceilings = measure_ceilings()
    providers = [table.off, table.on, "mx_fast"]
    report = Report(
        args.out, ceilings,
        "Kernel time per call in us (CUPTI); wall-clock per call in parentheses. "
        f"`tiles`: the plan's, {table.variable}=0 then =1 (bq x bk; p: a producer warpgroup, "
        f"P: a persistent grid); `{table.off}`: {table.variable}=0 (the default); "
        f"`{table.on}`: =1, {table.what}; `x off`: kernel time at 0 / at 1 "
        "(>1: the switched path is faster); `x mx.fast`: mx.fast kernel time / the faster "
        "fused kernel time.",
        ["B", "Hq/Hkv", "Lq", "Lk", "D", "dtype", "mask", "tiles", *providers,
         "x off", "x mx.fast", "max err vs mx.fast"],
    )
    forced = {table.off: "0", table.on: "1"}
    for c in SWITCH_TABLE_CASES:
        iters = args.iters or max(10, min(100, int(2e11 / c.work())))
        scale = c.D**-0.5
        (q, k, v, mask), _ = case_inputs(c, with_torch=False)
        def fused():
            return fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
        tiles = " / ".join(
            with_switch(table.variable, value,
                        lambda: tiles_label(fa.plan_summary(q, k, v, scale=scale, mask=mask).tiles))
            for value in forced.values())
        res = {}
        for name, value in forced.items():
            res[name] = measure_with(table.variable, value, fused, iters)
        res["mx_fast"] = measure_mlx(
            lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask), iters)
        want = mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)

        def fused_err():
            return mx.abs(fused()[:, :2].astype(mx.float32) - want[:, :2].astype(mx.float32)).max().item()

        err = max(with_switch(table.variable, value, fused_err) for value in forced.values())
        fk = min(res[table.off][0], res[table.on][0])
        report.row([str(c.B), f"{c.Hq}/{c.Hkv}", str(c.Lq), str(c.Lk), str(c.D), c.dtype,
                    c.mask_label(), tiles, *timing_cells(res, providers),
                    f"{res[table.off][0] / res[table.on][0]:.2f}",
                    f"{res['mx_fast'][0] / fk:.2f}", f"{err:.2e}"])
        del q, k, v, mask
        mx.clear_cache()
    report.close()


# Issue 42: auto (patch_mx_fast after tune) within 3% of the faster of
# mx.fast and the fused kernel on every row of the calls models make.
ROUTING_TOLERANCE = 1.03
RETIME_ROUNDS = 3


def auto_over_best(res):
    """auto's kernel time over the faster of fused and mx.fast; infinite
    where auto ran out of memory (it sent the call to mx.fast's unfused
    path)."""
    best = min(res[name][0] for name in ("fused", "mx_fast") if name in res)
    return res["auto"][0] / best if "auto" in res else math.inf


BATCHED_PREFILL_MASKS = [
    ("random bool", dict(mask="bool")),
    ("causal array", dict(mask="bool", window=0)),
    ("window 512", dict(mask="bool", window=512)),
    ("padding", dict(mask="bool", padding=True)),
]


def routing_cases():
    cases = list(WORKLOAD_CASES)
    for B in (1, 2, 4, 8):
        for L in (512, 2048, 8192):
            for label, mask in BATCHED_PREFILL_MASKS:
                case = Case(B, 32, L, 128, "bfloat16", Hkv=8, **mask)
                cases.append((f"batched prefill, {label}", case))
    for D in (64, 96, 128, 256):
        cases.append(("decode", Case(1, 32, 1, D, "bfloat16", Hkv=8, Lk=8192)))
        cases.append(("prefill", Case(1, 32, 4096, D, "bfloat16", "causal", Hkv=8)))
    return cases


# Issue 42's training rows, tuned as training steps (tune's training
# classes): where cuDNN's fused backward serves mx.fast's gradient; with
# array masks, where it is cuDNN's with a bias (additive) or starts from a
# mask as large as the scores (bool); L_q = 1000, not a multiple of cuDNN's
# backward tile, where it is plain ops; and float32, plain ops on TF32
# units both ways.
TRAINING_CASES = [
    ("training step", Case(1, 32, 2048, 128, "bfloat16", "causal")),
    ("training step", Case(1, 32, 4096, 128, "bfloat16")),
    ("training step", Case(4, 32, 1024, 64, "bfloat16", "causal", Hkv=8)),
    ("training step", Case(1, 32, 2048, 64, "float16", "add")),
    ("training step", Case(1, 32, 2048, 64, "float16", "bool")),
    ("training step", Case(1, 32, 1000, 128, "bfloat16", "causal")),
    ("training step", Case(1, 32, 1024, 128, "float32", "causal")),
]


def tune_call(c, training=False):
    """The case as mlx_fused_attn.tune takes it (its shape class is the
    case's), a training step's with ``training``."""
    if c.mask in (None, "causal"):
        mask = c.mask or "none"
    elif c.padding:
        mask = "bool-padding"
    elif c.mask == "bool" and c.window:
        mask = f"bool-window={c.window}"
    else:
        kind = "bool" if c.mask == "bool" else "additive"
        mask = kind if c.window is None and not c.alibi else f"{kind}-causal"
    # Here, not at the top: ab_bench.py imports this file beside builds without it.
    from mlx_fused_attn.tuning import Call

    return Call(c.B, c.Hq, c.Hkv, c.Lq, c.Lk, c.D, c.D, c.dtype, mask, training=training)


def run_routed_case(c, iters, training=False, rounds=1):
    """(kernel us, wall us) of the fused kernel, mx.fast and the patched
    mx.fast (auto) on one case, a forward call or with `training` a
    gradient step (training_step.py), and the route auto took. With
    `rounds`, the three are timed in turn that many times, every other round
    in reverse order (a drift of the clocks falls on all three alike), and
    each keeps its median."""
    scale = c.D**-0.5
    (q, k, v, mask), _ = case_inputs(c, with_torch=False)
    original = mx.fast.scaled_dot_product_attention
    calls = {
        "fused": lambda: fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask),
        "mx_fast": lambda: original(q, k, v, scale=scale, mask=mask),
        # Looked up at each call: the patched function inside the patch.
        "auto": lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask),
    }
    samples = {name: [] for name in calls}
    refused = set()
    for r in range(rounds):
        for name in list(calls)[:: 1 if r % 2 == 0 else -1]:
            if name in refused:
                continue
            with fa.patch_mx_fast() if name == "auto" else contextlib.nullcontext():
                # A training step's gradient function is made here, inside the
                # patch for auto, where mx.value_and_grad is the patched one.
                make = (gradient_step(name, original, q, k, v, scale=scale, mask=mask)
                        if training else calls[name])
                try:
                    samples[name].append(measure_mlx(make, iters))
                except RuntimeError as e:
                    # mx.fast's unfused path past the GPU's memory (array masks,
                    # B=8 L=8192): not a candidate; "-" in the table.
                    if not out_of_memory(e):
                        raise
                    refused.add(name)
                    mx.synchronize()
                    mx.clear_cache()
    results = {name: tuple(statistics.median(x) for x in zip(*s))
               for name, s in samples.items() if name not in refused}
    route = fa.route(q, k, v, scale=scale, mask=mask, training=training)
    del q, k, v, mask
    mx.clear_cache()
    return results, route


def routing_table(args):
    wanted = args.calls.split(",") if args.calls else None
    cases = [(label, c) for label, c in routing_cases() if not wanted or label in wanted]
    steps = [(label, c) for label, c in TRAINING_CASES if not wanted or label in wanted]
    start = time.perf_counter()
    tuned = fa.tune([tune_call(c) for _, c in cases] + [tune_call(c, True) for _, c in steps],
                    device=mx.Device(mx.gpu))  # fmt: skip
    tune_s = time.perf_counter() - start
    print(f"tuned {len(tuned)} shape classes in {tune_s:.1f} s", flush=True)
    report = Report(
        args.out, measure_ceilings(),
        "Kernel time per call in us (CUPTI, one evaluation a call); wall-clock per call in "
        f"parentheses. `auto`: mx.fast under patch_mx_fast() after tuning ({tune_s:.1f} s); "
        "`auto / best`: its kernel time over the faster of fused and mx.fast; ok: within "
        f"{ROUTING_TOLERANCE:.2f}x; `rounds`: 1, or for a row first timed outside it, the "
        f"median of {RETIME_ROUNDS} interleaved rounds. `route`: auto's choice, the source that "
        "decided and its hint. "
        "`training step` rows: the loss sum(o^2) and its gradients with respect to q, k and v "
        "(one mx.value_and_grad, one evaluation a call), auto's made inside the patch.",
        ["call", "B", "Hq/Hkv", "Lq", "Lk", "D", "dtype", "mask", "fused", "mx_fast", "auto",
         "auto / best", "ok", "rounds", "route"],
        text_columns=1,
    )
    rows = []
    for is_step, (label, c) in [(False, case) for case in cases] + [(True, step) for step in steps]:
        # A step's backward is about twice its forward's work.
        iters = args.iters or max(10, min(100, int(2e11 / (c.work() * (3 if is_step else 1)))))
        rounds = 1
        res, route = run_routed_case(c, iters, training=is_step)
        ratio = auto_over_best(res)
        if ratio > ROUTING_TOLERANCE:
            # A miss is timed again in interleaved rounds: one pass of three
            # separate timings put the same kernel 4% apart (H100, 2026-12-06).
            rounds = RETIME_ROUNDS
            res, route = run_routed_case(c, iters, training=is_step, rounds=rounds)
            ratio = auto_over_best(res)
        ok = ratio <= ROUTING_TOLERANCE
        hint = "" if route.hint == fa.PlanHint() else f" {route.hint}"
        report.row([label, str(c.B), f"{c.Hq}/{c.Hkv}", str(c.Lq), str(c.Lk), str(c.D), c.dtype,
                    c.mask_label(), *timing_cells(res, ["fused", "mx_fast", "auto"]),
                    f"{ratio:.3f}", "yes" if ok else "NO", str(rounds),
                    f"{route.choice} ({route.source}){hint}"])
        rows.append({"call": label, "B": c.B, "H_q": c.Hq, "H_kv": c.Hkv, "L_q": c.Lq, "L_k": c.Lk,
                     "D": c.D, "dtype": c.dtype, "mask": c.mask_label(),
                     **{f"{n}_kernel_us": t[0] for n, t in res.items()},
                     **{f"{n}_wall_us": t[1] for n, t in res.items()},
                     "training": is_step, "auto_over_best": ratio, "ok": ok, "rounds": rounds,
                     "route": route.choice,
                     "source": route.source, "hint": route.hint._asdict()})
    failed = [r["call"] for r in rows if not r["ok"]]
    summary = f"{len(rows) - len(failed)} of {len(rows)} rows within {ROUTING_TOLERANCE:.2f}x"
    report.lines.append("")
    report.lines.append(summary)
    print(summary, flush=True)
    report.close()
    if args.json:
        strict_json.dump({"gpu": torch.cuda.get_device_name(), "mlx": mx.__version__,
                          "tune_s": tune_s, "rows": rows,
                          "tuned": [{"class": r.shape_class.key(), "winner": r.winner, "us": r.us}
                                    for r in tuned]}, args.json)


if __name__ == "__main__":
    main()
