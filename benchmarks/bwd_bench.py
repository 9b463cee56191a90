"""Training-time attention: forward plus backward (dQ, dK, dV) of
mlx_fused_attn's fused path against mx.fast and MLX unfused ops, and on
CUDA against PyTorch's SDPA backends (cuDNN, flash, efficient), in one run,
with the peak memory of each MLX path.

For each case and provider, three times: the forward and backward together
(the gradients with respect to q, k and v of the output with cotangent dO,
as torch's out.backward(dO)), the forward
alone, and the backward as their difference. On the CPU they are
wall-clock, best of --reps; on CUDA kernel time by CUPTI
(gpu_bench.kernel_time_us), as in the issue's table. Peak memory is MLX's
(mx.get_peak_memory) over the forward and backward, above the inputs; the
op's outputs and temporaries are in it (MLX's allocator). Each
row also gives the largest gradient difference from mx.fast, relative to
mx.fast's largest gradient.

    python benchmarks/bwd_bench.py                      # this device's cases
    python benchmarks/bwd_bench.py --case 4x8x512x64-fp32-causal --skip mlx_unfused
    python benchmarks/bwd_bench.py --out bwd.md         # also write the table
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

import mlx.core as mx

import mlx_fused_attn as fa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdpa_bench import attention_unfused, flops, flops_unit  # noqa: E402

DTYPES = {"fp16": mx.float16, "bf16": mx.bfloat16, "fp32": mx.float32}
# Calls per rep of the wall-clock stream on CUDA.
WALL_CALLS = 5


@dataclass(frozen=True)
class Case:
    B: int
    H: int
    L: int
    D: int
    dtype: str
    # None, "causal" (the string), or an array: a bool one as mlx-lm builds
    # it for training, "causal-bool" or "window<w>-bool" (a causal window of
    # w keys); a random bool one keeping 3 scores in 4, "random75-bool"; or
    # an additive one of standard normal values, "normal-add" (every block of
    # both random ones mixes values, so that no block can be skipped).
    mask: str | None = None

    @property
    def name(self):
        return f"{self.B}x{self.H}x{self.L}x{self.D}-{self.dtype}" + (f"-{self.mask}" if self.mask else "")

    def array_mask(self):
        """The array mask as numpy [L, L]: bool (key j visible to query i) or
        an additive mask's float32 values; None for the string masks."""
        if self.mask is None or self.mask == "causal":
            return None
        import numpy as np

        rng = np.random.default_rng(0)
        if self.mask == "random75-bool":
            return rng.random((self.L, self.L)) < 0.75
        if self.mask == "normal-add":
            return rng.standard_normal((self.L, self.L), dtype=np.float32)
        i, j = np.arange(self.L)[:, None], np.arange(self.L)[None]
        visible = j <= i
        if self.mask.startswith("window"):
            visible &= j > i - int(self.mask[len("window") : -len("-bool")])
        return visible

    def visible(self):
        """The share of scores the mask shows."""
        m = self.array_mask()
        if m is not None:
            return float(m.mean()) if m.dtype == bool else 1.0
        return (self.L + 1) / (2 * self.L) if self.mask == "causal" else 1.0


# The issue's cases: its H200 table, and the CPU case it tried as a new user;
# then the masks of training: mlx-lm's causal and sliding-window arrays.
CASES = {
    c.name: c
    for c in [
        Case(1, 32, 1024, 64, "fp16"),
        Case(1, 32, 4096, 128, "bf16"),
        Case(1, 32, 4096, 128, "bf16", "causal"),
        Case(4, 32, 8192, 128, "bf16", "causal"),
        Case(4, 8, 512, 64, "fp32", "causal"),
        Case(1, 32, 4096, 128, "bf16", "causal-bool"),
        Case(1, 32, 4096, 128, "bf16", "window512-bool"),
        Case(1, 32, 2048, 64, "fp16", "random75-bool"),
        Case(1, 32, 2048, 64, "fp16", "normal-add"),
    ]
}
DEFAULT_CASES = {
    "cpu": ["1x32x1024x64-fp16", "4x8x512x64-fp32-causal"],
    "gpu": [
        "1x32x1024x64-fp16",
        "1x32x4096x128-bf16",
        "1x32x4096x128-bf16-causal",
        "4x32x8192x128-bf16-causal",
        "1x32x4096x128-bf16-causal-bool",
        "1x32x4096x128-bf16-window512-bool",
    ],
}
MLX_PROVIDERS = {
    "fused": lambda q, k, v, s, m: fa.scaled_dot_product_attention(q, k, v, scale=s, mask=m),
    "mx_fast": lambda q, k, v, s, m: mx.fast.scaled_dot_product_attention(q, k, v, scale=s, mask=m),
    "mlx_unfused": attention_unfused,
}
TORCH_PROVIDERS = ["torch_cudnn", "torch_flash", "torch_eff"]


def on_cuda():
    return mx.default_device() == mx.gpu and mx.cuda.is_available()


def mlx_inputs(case):
    dt = DTYPES[case.dtype]
    keys = mx.random.split(mx.random.key(0), 4)
    shape = (case.B, case.H, case.L, case.D)
    q, k, v, do = (mx.random.normal(shape, key=key).astype(dt) for key in keys)
    mx.eval(q, k, v, do)
    return q, k, v, do


def mlx_calls(attn, case, q, k, v, do):
    """(forward, forward and backward): functions returning what to eval.
    The backward is the vjp with dO as the output's cotangent, as torch's
    out.backward(dO): no loss ops around the attention."""
    m = case.array_mask()
    mask = case.mask if m is None else mx.array(m) if m.dtype == bool else mx.array(m).astype(DTYPES[case.dtype])
    scale = case.D**-0.5

    def forward(q, k, v):
        return attn(q, k, v, scale, mask)

    def both():
        _, grads = mx.vjp(forward, [q, k, v], [do])
        return grads

    return (lambda: forward(q, k, v)), both


def best_wall_ms(make, reps):
    mx.eval(make())
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        mx.eval(make())
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def peak_mib(make):
    mx.synchronize()
    base = mx.get_active_memory()
    mx.reset_peak_memory()
    mx.eval(make())
    mx.synchronize()
    return (mx.get_peak_memory() - base) / 2**20


def time_ms(make, reps):
    if on_cuda():
        import gpu_bench

        return gpu_bench.kernel_time_us(lambda: mx.eval(make()), mx.synchronize, reps) / 1e3
    return best_wall_ms(make, reps)


def max_relative_difference(got, want):
    return max(
        float(mx.abs(g.astype(mx.float32) - w.astype(mx.float32)).max())
        / max(float(mx.abs(w.astype(mx.float32)).max()), 1e-30)
        for g, w in zip(got, want)
    )


def torch_times(case, name, reps):
    """(fwd+bwd ms, fwd ms) of a torch SDPA backend, kernel time."""
    import gpu_bench
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[case.dtype]
    rng = np.random.default_rng(0)
    shape = (case.B, case.H, case.L, case.D)
    q, k, v, do = (torch.from_numpy(rng.standard_normal(shape, dtype=np.float32)).to("cuda", tdt) for _ in range(4))
    for x in (q, k, v):
        x.requires_grad_(True)
    backend = gpu_bench.TORCH_BACKENDS[name]

    m = case.array_mask()
    attn_mask = None if m is None else torch.from_numpy(m).to("cuda", torch.bool if m.dtype == bool else tdt)

    def forward():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, is_causal=case.mask == "causal", scale=case.D**-0.5
            )

    def both():
        q.grad = k.grad = v.grad = None
        forward().backward(do)

    def fwd():
        with torch.no_grad():
            forward()

    try:
        kernel = tuple(gpu_bench.kernel_time_us(f, torch.cuda.synchronize, reps) / 1e3 for f in (both, fwd))
        wall = tuple(gpu_bench.torch_wall_us(f, WALL_CALLS * reps) / 1e3 for f in (both, fwd))
        return kernel + wall
    except RuntimeError as e:  # the backend does not take the case
        print(f"  {name}: {str(e).splitlines()[0]}", file=sys.stderr)
        return (float("nan"),) * 4


def run_case(case, providers, reps):
    rows = {}
    q, k, v, do = mlx_inputs(case)
    reference = None
    for name in [p for p in MLX_PROVIDERS if p in providers]:
        fwd, both = mlx_calls(MLX_PROVIDERS[name], case, q, k, v, do)
        t_both, t_fwd = time_ms(both, reps), time_ms(fwd, reps)
        grads = both()
        mx.eval(grads)
        if name == "mx_fast":
            reference = grads
        rows[name] = {"both": t_both, "fwd": t_fwd, "peak": peak_mib(both), "grads": grads}
        if on_cuda():
            import gpu_bench

            rows[name]["wall"] = tuple(gpu_bench.mlx_wall_us(f, WALL_CALLS * reps) / 1e3 for f in (both, fwd))
        print(f"  {name}: {t_both:.2f} ms", file=sys.stderr, flush=True)
    for row in rows.values():
        row["diff"] = max_relative_difference(row.pop("grads"), reference) if reference else float("nan")
    for name in [p for p in TORCH_PROVIDERS if p in providers]:
        t_both, t_fwd, w_both, w_fwd = torch_times(case, name, reps)
        rows[name] = {"both": t_both, "fwd": t_fwd, "wall": (w_both, w_fwd), "peak": float("nan"), "diff": float("nan")}
    return rows


def cell(x, spec):
    """A table cell; '-' for what was not measured."""
    return "-" if x != x else format(x, spec)


def table(results, device):
    unit, per_gflops = flops_unit()
    # The scores the mask shows: a window's are its share of the whole.
    fwd_flops = {c.name: flops(c.B, c.H, c.L, c.L, c.D, False) * c.visible() for c in results}
    lines = [
        f"Device: {device}; MLX {mx.__version__}; times in ms "
        + ("(kernel time, CUPTI)" if on_cuda() else "(wall-clock, best of reps)")
        + "; backward = (forward + backward) - forward; peak: MLX's, MiB."
        + (
            " `bwd wall`: the same difference of wall-clock times per call over a stream of calls"
            " with one synchronisation. Kernel time counts kernels that run side by side once"
            " (the fused backward's dK/dV and dQ kernels do)."
            if on_cuda()
            else ""
        ),
        "",
        f"| case | provider | fwd+bwd | fwd | bwd | bwd wall | bwd {unit} | peak MiB | max grad diff vs mx.fast | fwd+bwd / fused's |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case, rows in results.items():
        fused = rows.get("fused", {}).get("both", float("nan"))
        for name, r in rows.items():
            bwd = r["both"] - r["fwd"]
            wall = f"{r['wall'][0] - r['wall'][1]:.2f}" if "wall" in r else "-"
            # The backward's five products against the forward's two.
            rate = 2.5 * fwd_flops[case.name] / (bwd * 1e-3) / 1e9 / per_gflops if bwd > 0 else float("nan")
            lines.append(
                f"| {case.name} | {name} | {r['both']:.2f} | {r['fwd']:.2f} | {bwd:.2f} | {wall} "
                f"| {cell(rate, '.3g')} | {cell(r['peak'], '.0f')} | {cell(r['diff'], '.1e')} "
                f"| {r['both'] / fused:.1f}x |"
            )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", action="append", choices=list(CASES), help="repeatable; default: this device's")
    parser.add_argument("--skip", action="append", default=[], help="providers to leave out (repeatable)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()
    device = "cuda" if on_cuda() else ("gpu" if mx.default_device() == mx.gpu else "cpu")
    names = args.case or DEFAULT_CASES["cpu" if device == "cpu" else "gpu"]
    providers = list(MLX_PROVIDERS) + (TORCH_PROVIDERS if device == "cuda" else [])
    providers = [p for p in providers if p not in args.skip]
    results = {}
    for name in names:
        print(name, file=sys.stderr, flush=True)
        results[CASES[name]] = run_case(CASES[name], providers, args.reps)
    text = table(results, device)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
