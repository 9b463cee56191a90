"""Neighborhood attention on an NVIDIA GPU: the fused kernel against PyTorch's
FlexAttention with the same neighborhoods (a block mask from
create_block_mask over a mask_mod that computes NATTEN's windows) and against
dense attention over every token (mx.fast, i.e. cuDNN, and torch's flash).

Times per call, from the same run: kernel time by CUPTI through
torch.profiler (it sees MLX's kernels too) and wall-clock, with the helpers
of gpu_bench.py. The floors come from the ceilings gpu_bench.py measures at
the start (a bf16 matmul, a device copy): FLOPs / matmul rate, where FLOPs
are 4 B H D times the (query, key) neighbour pairs, counted exactly; and
(q, k, v, o bytes) / copy bandwidth. The fused output is checked against
FlexAttention's in every row.

    python benchmarks/na_gpu_bench.py [--out table.md] [--budget-s 240]
"""

import argparse
import math
import sys
import time

import mlx.core as mx
import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import mlx_fused_attn as fa
from gpu_bench import kernel_time_us, measure_ceilings, mlx_wall_us, torch_wall_us

DTYPES = {"float16": (mx.float16, torch.float16), "bfloat16": (mx.bfloat16, torch.bfloat16)}

# name, spatial, H, D, kernel, dilation, causal, dtype. The targets
# first (B = 1 throughout); the rest run while --budget-s lasts.
CASES = [
    ("1d k7", (16384,), 16, 64, (7,), (1,), (False,), "float16"),
    ("1d k63", (16384,), 16, 64, (63,), (1,), (False,), "float16"),
    ("2d 7x7", (128, 128), 16, 64, (7, 7), (1, 1), (False, False), "float16"),
    ("2d 13x13", (128, 128), 16, 64, (13, 13), (1, 1), (False, False), "float16"),
    ("1d k63 causal dil2", (16384,), 16, 64, (63,), (2,), (True,), "bfloat16"),
    ("3d 5x5x5", (32, 32, 32), 16, 64, (5, 5, 5), (1, 1, 1), (False, False, False), "float16"),
    ("2d 7x7 D128", (128, 128), 16, 128, (7, 7), (1, 1), (False, False), "float16"),
]


def window_counts(n, k, d, causal):
    """Keys each position of one axis sees (NATTEN's windows)."""
    counts = []
    for i in range(n):
        j = i // d
        counts.append(min(k, j + 1) if causal else k)
    return counts


def neighbour_pairs(spatial, kernel, dilation, causal):
    """(query, key) pairs: the neighborhood is a product over the axes."""
    pairs = 1
    for n, k, d, c in zip(spatial, kernel, dilation, causal):
        pairs *= sum(window_counts(n, k, d, c))
    return pairs


def na_mask_mod(spatial, kernel, dilation, causal):
    """FlexAttention's mask_mod for the neighborhoods, on flat token indices
    (row-major over the spatial axes), written from NATTEN's definition."""
    axes = list(zip(spatial, kernel, dilation, causal))

    def axis_ok(qc, kc, n, k, d, c):
        g = qc % d
        j = qc // d
        kj = kc // d
        same_group = (kc % d) == g
        if c:
            return same_group & (kj <= j) & (kj > j - k)
        m = (n - g + d - 1) // d
        start = torch.minimum(torch.clamp(j - k // 2, min=0), m - k)
        return same_group & (kj >= start) & (kj < start + k)

    def mask_mod(b, h, q_idx, kv_idx):
        ok = None
        qr, kr = q_idx, kv_idx
        for n, k, d, c in reversed(axes):
            t = axis_ok(qr % n, kr % n, n, k, d, c)
            ok = t if ok is None else ok & t
            qr, kr = qr // n, kr // n
        return ok

    return mask_mod


def mlx_times(make, iters):
    return kernel_time_us(lambda: mx.eval(make()), mx.synchronize, iters), mlx_wall_us(make, iters)


def torch_times(call, iters):
    return kernel_time_us(call, torch.cuda.synchronize, iters), torch_wall_us(call, iters)


def run_case(case, ceilings, iters):
    name, spatial, H, D, kernel, dilation, causal, dtype_name = case
    mdt, tdt = DTYPES[dtype_name]
    B, L = 1, int(np.prod(spatial))
    scale = D**-0.5
    rng = np.random.default_rng(L + D)
    host = [rng.standard_normal((B, L, H, D), dtype=np.float32) for _ in range(3)]
    q, k, v = (mx.array(x.reshape((B, *spatial, H, D))).astype(mdt) for x in host)
    qd, kd, vd = (mx.array(x.transpose(0, 2, 1, 3)).astype(mdt) for x in host)
    tq, tk, tv = (torch.from_numpy(x).to("cuda", tdt).transpose(1, 2).contiguous() for x in host)
    mx.eval(q, k, v, qd, kd, vd)
    del host

    ok, reason = fa.neighborhood_can_use_fused(q, k, v, list(kernel), dilation=list(dilation),
                                               is_causal=list(causal))
    if not ok:
        raise RuntimeError(f"{name}: not fused: {reason}")

    def fused():
        return fa.neighborhood_attention(q, k, v, list(kernel), dilation=list(dilation),
                                         is_causal=list(causal), scale=scale)

    res = {"fused": mlx_times(fused, iters)}

    t0 = time.perf_counter()
    block_mask = create_block_mask(na_mask_mod(spatial, kernel, dilation, causal), None, None, L, L,
                                   device="cuda")
    flex = torch.compile(flex_attention, dynamic=False)

    def flex_call():
        return flex(tq, tk, tv, block_mask=block_mask, scale=scale)

    want = flex_call()
    torch.cuda.synchronize()
    flex_setup_s = time.perf_counter() - t0
    res["flex"] = torch_times(flex_call, iters)

    dense_iters = max(3, iters // 10)
    res["dense_cudnn"] = mlx_times(
        lambda: mx.fast.scaled_dot_product_attention(qd, kd, vd, scale=scale), dense_iters)

    def flash():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(tq, tk, tv, scale=scale)

    res["dense_flash"] = torch_times(flash, dense_iters)

    got = np.array(fused().astype(mx.float32)).reshape(B, L, H, D)
    ref = want.float().transpose(1, 2).cpu().numpy()
    err = float(np.abs(got - ref).max())

    flops = 4.0 * B * H * D * neighbour_pairs(spatial, kernel, dilation, causal)
    nbytes = 4 * B * L * H * D * q.itemsize
    tflops_ceiling, tbps_ceiling = ceilings
    compute_us = flops / (tflops_ceiling * 1e12) * 1e6
    memory_us = nbytes / (tbps_ceiling * 1e12) * 1e6
    del q, k, v, qd, kd, vd, tq, tk, tv, want, block_mask
    torch.cuda.empty_cache()
    mx.clear_cache()
    return res, flops, compute_us, memory_us, err, flex_setup_s


def fmt(t):
    k, w = t
    return "-" if math.isnan(k) else f"{k:.1f} ({w:.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="also write the markdown table here")
    ap.add_argument("--iters", type=int, default=50, help="calls per measurement")
    ap.add_argument("--budget-s", type=float, default=240, help="start no case after this long")
    ap.add_argument("--only", action="append", help="run the cases whose name holds this "
                    "(repeatable; default: all)")
    ap.add_argument("--repeat", type=int, default=1, help="measure each case this many times")
    args = ap.parse_args()
    cases = [c for c in CASES if not args.only or any(o in c[0] for o in args.only)]

    start = time.perf_counter()
    ceilings = measure_ceilings()
    lines = [
        f"Ceilings: bf16 matmul {ceilings[0]:.0f} TFLOP/s, copy {ceilings[1]:.2f} TB/s. "
        f"GPU: {torch.cuda.get_device_name()}; torch {torch.__version__}; MLX {mx.__version__}.",
        "",
        "Kernel time per call in us (CUPTI), wall-clock in parentheses. B = 1. `floor`: the "
        "larger of the compute floor (FLOPs / matmul rate) and the memory floor (q, k, v, o "
        "bytes / copy rate); `% floor`: floor / fused kernel time. `x flex`: FlexAttention "
        "kernel time / fused kernel time. `err`: max |fused - flex|.",
        "",
        "| case | spatial | H | D | kernel | dil | causal | dtype | fused | TFLOP/s | compute "
        "floor | memory floor | % floor | flex | x flex | dense cuDNN (mx.fast) | dense flash "
        "| err |",
        "|---|---|---:|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    for case in [c for c in cases for _ in range(args.repeat)]:
        if time.perf_counter() - start > args.budget_s:
            print(f"budget spent: {case[0]} and later cases not run", file=sys.stderr)
            break
        name, spatial, H, D, kernel, dilation, causal, dtype_name = case
        res, flops, compute_us, memory_us, err, flex_s = run_case(case, ceilings, args.iters)
        fk = res["fused"][0]
        floor = max(compute_us, memory_us)
        cells = [
            name, "x".join(map(str, spatial)), str(H), str(D), "x".join(map(str, kernel)),
            "x".join(map(str, dilation)), "".join("y" if c else "n" for c in causal), dtype_name,
            fmt(res["fused"]), f"{flops / (fk * 1e-6) / 1e12:.0f}", f"{compute_us:.1f}",
            f"{memory_us:.1f}", f"{100 * floor / fk:.0f}", fmt(res["flex"]),
            f"{res['flex'][0] / fk:.2f}", fmt(res["dense_cudnn"]), fmt(res["dense_flash"]),
            f"{err:.1e}",
        ]
        line = "| " + " | ".join(cells) + " |"
        lines.append(line)
        print(line, flush=True)
        print(f"  ({name}: flex block mask + compile {flex_s:.1f} s)", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
