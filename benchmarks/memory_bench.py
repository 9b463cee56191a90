"""Wall-clock against kernel time for the op's outputs in MLX's allocator
(issue 16, item 3), on an NVIDIA GPU.

For each case: the op's own kernel time per call (CUPTI, one evaluation a
call), the time of the no-op kernel through which MLX allocates the output
(backend/cuda/device_buffer.h), wall-clock per call over a stream of
async_eval calls with one synchronisation, and wall / kernel (goal: <= 1.2).
The wall is measured in a fresh process that loads no profiler, as a user's
would: CUPTI, once attached, slows every launch of its process (seen: 45 ->
50 us a call at the goal's shape). The accounting itself is tested in
tests/test_cuda_memory.py.

A second table (issue 46) times a call made after the host read the previous
call's output (np.array) against a steady call, each call evaluated alone:
kernel time (CUPTI), wall per call (call and evaluation), and their ratios
(goal: <= 1.1). The host read moves the output's buffer to unified memory for
good, and MLX's cache hands that buffer to the next output of its size. The
fused kernel runs as it does by default (such outputs moved to device
memory) and with MLX_FUSED_ATTN_DEVICE_OUTPUTS=0 (left in the unified memory
the cache gives); mx.fast beside them. The
walls and the kernel times of each row are taken in fresh processes, the
steady calls before the host reads.

    python benchmarks/memory_bench.py [--iters N] [--host-read-only]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import mlx.core as mx
import numpy as np

import mlx_fused_attn as fa

NO_OP = "mlx_fused_attn_no_op"
DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16}
# Calls before a wall is timed: the GPU's clocks rise under load.
WARMUP_S = 1.0


def profiled_us(step, iters):
    """(op kernels, no-op kernel) device time per step() (CUPTI); copies and
    fills (the host read's move to unified memory) are not kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            step()
        mx.synchronize()
    op = no_op = 0.0
    for e in prof.key_averages():
        if e.device_type != torch.autograd.DeviceType.CUDA or e.key.startswith(("Memcpy", "Memset")):
            continue
        if NO_OP in e.key:
            no_op += e.self_device_time_total
        else:
            op += e.self_device_time_total
    return op / iters, no_op / iters


def kernel_times_us(make, iters):
    """(op kernels, no-op kernel) device time per call."""
    mx.eval(make())
    mx.synchronize()
    return profiled_us(lambda: mx.eval(make()), iters)


def wall_us(make, iters, repeats=3):
    """Best of `repeats` streams of `iters` async_eval calls, each ended by
    one synchronisation, after WARMUP_S of calls."""
    end = time.perf_counter() + WARMUP_S
    while time.perf_counter() < end:
        mx.async_eval(make())
    mx.synchronize()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            mx.async_eval(make())
        mx.synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e6 / iters)
    return best


def attention_case(B, H, L, D, dtype, mx_fast=False):
    rng = np.random.default_rng(L + D)
    q, k, v = (mx.array(rng.standard_normal((B, H, L, D), dtype=np.float32)).astype(DTYPES[dtype])
               for _ in range(3))
    mx.eval(q, k, v)
    if mx_fast:
        return lambda: mx.fast.scaled_dot_product_attention(q, k, v, scale=D**-0.5)
    return lambda: fa.scaled_dot_product_attention(q, k, v, scale=D**-0.5, force_fused=True)


def neighborhood_case(spatial, H, D, kernel, dtype):
    rng = np.random.default_rng(D)
    q, k, v = (mx.array(rng.standard_normal((1, *spatial, H, D), dtype=np.float32)).astype(DTYPES[dtype])
               for _ in range(3))
    mx.eval(q, k, v)
    return lambda: fa.neighborhood_attention(q, k, v, list(kernel), scale=D**-0.5)


CASES = [
    ("attention B=1 H=32 L=1024 D=128 bf16", lambda: attention_case(1, 32, 1024, 128, "bfloat16")),
    ("attention B=1 H=32 L=1024 D=128 fp16", lambda: attention_case(1, 32, 1024, 128, "float16")),
    ("short B=1000 H=80 L=32 D=64 fp16", lambda: attention_case(1000, 80, 32, 64, "float16")),
    ("neighborhood 2d 128x128 7x7 H=16 D=64 fp16",
     lambda: neighborhood_case((128, 128), 16, 64, (7, 7), "float16")),
    ("mx.fast, attention B=1 H=32 L=1024 D=128 bf16",
     lambda: attention_case(1, 32, 1024, 128, "bfloat16", mx_fast=True)),
]


# The call; fp16, as NumPy has no bfloat16. (name, mx_fast,
# MLX_FUSED_ATTN_DEVICE_OUTPUTS).
HOST_READ_ROWS = [
    ("fused", False, "1"),
    ("fused, DEVICE_OUTPUTS=0", False, "0"),
    ("mx.fast", True, "0"),
]
HOST_READ_SHAPE = (1, 32, 1024, 128, "float16")


class Sequence:
    """Calls each evaluated alone; with host_read, each after np.array of the
    previous call's output, which the assignment then frees into MLX's cache
    before the call's evaluation allocates."""

    def __init__(self, make, host_read):
        self.make, self.host_read = make, host_read
        self.out = make()
        mx.eval(self.out)

    def step(self):
        if self.host_read:
            np.array(self.out)
        self.out = self.make()
        mx.eval(self.out)

    def wall_us(self, iters):
        """Median wall of the call and its evaluation, the host read excluded."""
        times = []
        for _ in range(iters):
            if self.host_read:
                np.array(self.out)
            t0 = time.perf_counter()
            self.out = self.make()
            mx.eval(self.out)
            times.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(times)


def host_read_part(mx_fast, part, iters):
    """{steady,host_read}_{part}_us of one row, part "wall" or "kernel", the
    steady calls first: after a host read the cache holds a unified buffer,
    which a steady call could then get."""
    make = attention_case(*HOST_READ_SHAPE, mx_fast=mx_fast)
    for _ in range(20):
        mx.eval(make())
    res = {}
    for mode, host_read in (("steady", False), ("host_read", True)):
        seq = Sequence(make, host_read)
        res[f"{mode}_{part}_us"] = (
            seq.wall_us(iters) if part == "wall" else profiled_us(seq.step, iters)[0]
        )
    return res


def host_read_row(mx_fast, device_outputs, iters):
    """Both parts of one row, each in a fresh process: the profiler, once
    attached, slows every launch of its process."""
    env = dict(os.environ)
    env["MLX_FUSED_ATTN_DEVICE_OUTPUTS"] = device_outputs
    res = {}
    for part in ("wall", "kernel"):
        run = subprocess.run(
            [sys.executable, __file__, "--host-read-part", f"{int(mx_fast)},{part}",
             "--iters", str(iters)],
            capture_output=True, text=True, check=True, env=env,
        )
        res.update(json.loads(run.stdout.splitlines()[-1]))
    return res


def host_read_table(iters):
    B, H, L, D, dtype = HOST_READ_SHAPE
    print(f"\nA call after the host read the previous output (np.array), against a steady "
          f"call (issue 46): B={B} H={H} L={L} D={D} {dtype}, each call evaluated alone, "
          f"{iters} calls; kernel: CUPTI, wall: median of the call and its evaluation")
    print("| provider | steady kernel us | after read kernel us | kernel ratio "
          "| steady wall us | after read wall us | wall ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, mx_fast, device_outputs in HOST_READ_ROWS:
        r = host_read_row(mx_fast, device_outputs, iters)
        print(f"| {name} | {r['steady_kernel_us']:.1f} | {r['host_read_kernel_us']:.1f} "
              f"| {r['host_read_kernel_us'] / r['steady_kernel_us']:.2f} "
              f"| {r['steady_wall_us']:.1f} | {r['host_read_wall_us']:.1f} "
              f"| {r['host_read_wall_us'] / r['steady_wall_us']:.2f} |", flush=True)


def wall_in_fresh_process(index, iters):
    """wall_us of CASES[index], measured by this script in a new process."""
    run = subprocess.run(
        [sys.executable, __file__, "--wall-of", str(index), "--iters", str(iters)],
        capture_output=True, text=True, check=True,
    )
    return float(run.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=2000, help="calls per wall-clock stream")
    ap.add_argument("--kernel-iters", type=int, default=200, help="calls per kernel-time measurement")
    ap.add_argument("--host-read-iters", type=int, default=100,
                    help="calls per measurement of the host read table")
    ap.add_argument("--host-read-only", action="store_true", help="only the host read table")
    ap.add_argument("--wall-of", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--host-read-part", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.wall_of is not None:
        print(wall_us(CASES[args.wall_of][1](), args.iters))
        return
    if args.host_read_part is not None:
        mx_fast, part = args.host_read_part.split(",")
        print(json.dumps(host_read_part(mx_fast == "1", part, args.iters)))
        return
    if args.host_read_only:
        host_read_table(args.host_read_iters)
        return
    print(f"MLX {mx.__version__}; wall: best of 3 streams of {args.iters} calls, "
          f"after {WARMUP_S:.0f} s of calls, in a process without a profiler")
    print("| case | kernel us | no-op us | wall us | wall / kernel |")
    print("|---|---:|---:|---:|---:|")
    for index, (name, setup) in enumerate(CASES):
        wall = wall_in_fresh_process(index, args.iters)
        op_us, no_op_us = kernel_times_us(setup(), args.kernel_iters)
        print(f"| {name} | {op_us:.1f} | {no_op_us:.1f} | {wall:.1f} | {wall / op_us:.2f} |",
              flush=True)
    host_read_table(args.host_read_iters)


if __name__ == "__main__":
    main()
