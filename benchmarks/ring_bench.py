"""Ring attention against one process: time and peak memory per process for
1, 2 and 4 processes on one sequence, and how much of the transfers the
kernels hide.

The driver starts each process count with ``mlx.launch --backend ring``
(one process: a plain subprocess, the fused call on the whole sequence)
and prints a row per count. Every process holds its slice of q, k, v
(``ring_shard``) and reports:

- ``fwd_ms`` (and ``fwd_bwd_ms`` with ``--backward``): wall-clock of
  ``ring_attention`` (and ``mx.grad`` through it), best of ``--iters``;
- ``peak_mib``: MLX's peak memory during the forward, the process's q, k, v
  included, and ``peak_vs_one``: that over the one-process call's peak
  (with ``--backward`` also ``fb_peak_mib``, forward plus backward);
- ``compute_ms``: the same kernels without transfers (each step's block
  from local arrays of its shape), ``transfer_ms``: the same transfers
  without kernels, ``exposed_ms``: ``fwd - compute``, what the ring costs
  beyond its kernels (transfers not hidden, and each step's wait for the
  slowest process), and ``overlap``: ``(compute + transfer - fwd) /
  transfer`` clipped to [0, 1], the share of the transfers hidden behind
  the kernels. The slowest process's row is printed (its peak the largest
  of any process); ``--json`` keeps every process's.

    python benchmarks/ring_bench.py --total 32768 --heads 2 --causal
    python benchmarks/ring_bench.py --total 8192 --backward --json ring.json
    # NVIDIA GPUs: --backend nccl (one GPU a process)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import mlx.core as mx

import mlx_fused_attn as fa
from mlx_fused_attn import ring as ring_impl
from mlx_fused_attn._strict_json import dump

DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32}


def best_ms(fn, iters):
    fn()  # warm-up: kernels built, buffers in MLX's cache
    best = float("inf")
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def inputs(args, rank, size):
    kv_heads = args.kv_heads or args.heads
    shapes = [(1, h, args.total, args.hdim) for h in (args.heads, kv_heads, kv_heads)]
    dt = DTYPES[args.dtype]
    keys = mx.random.split(mx.random.key(0), 3)
    whole = [mx.random.normal(shape, key=k).astype(dt) for shape, k in zip(shapes, keys)]
    if size > 1:
        whole = [fa.ring_shard(x, rank, size, layout=args.layout) for x in whole]
    mx.eval(whole)
    return whole


def peak_mib(fn):
    mx.synchronize()
    mx.clear_cache()
    mx.reset_peak_memory()
    fn()
    return mx.get_peak_memory() / 2**20


def worker(args):
    group = mx.distributed.init()
    rank, size = group.rank(), group.size()
    q, k, v = inputs(args, rank, size)
    scale = args.hdim**-0.5

    def forward():
        mx.eval(fa.ring_attention(q, k, v, scale=scale, causal=args.causal, group=group, layout=args.layout))

    def forward_backward():
        loss = lambda q, k, v: fa.ring_attention(  # noqa: E731
            q, k, v, scale=scale, causal=args.causal, group=group, layout=args.layout
        ).astype(mx.float32).sum()
        mx.eval(mx.grad(loss, argnums=(0, 1, 2))(q, k, v))

    row = {"procs": size, "rank": rank, "L_per_proc": q.shape[2]}
    row["peak_mib"] = peak_mib(forward)
    row["fwd_ms"] = best_ms(forward, args.iters)
    if args.backward:
        row["fb_peak_mib"] = peak_mib(forward_backward)
        row["fwd_bwd_ms"] = best_ms(forward_backward, args.iters)
    if size > 1:
        ring = ring_impl._Ring(group, ring_impl._gather_lengths(k.shape[2], group), args.causal, args.layout)
        row["compute_ms"] = best_ms(lambda: compute_only(ring, q, k, v, scale), args.iters)
        row["transfer_ms"] = best_ms(lambda: transfer_only(ring, k, v), args.iters)
        row["exposed_ms"] = row["fwd_ms"] - row["compute_ms"]
        hidden = row["transfer_ms"] - row["exposed_ms"]
        row["overlap"] = min(1.0, max(0.0, hidden / row["transfer_ms"]))
    print("RESULT " + json.dumps(row), flush=True)


def compute_only(ring, q, k, v, scale):
    """The forward's kernels and merges, step by step, on local blocks of
    each step's shape: the ring without its transfers."""
    qp = ring.pieces[ring.rank]
    B, H = q.shape[:2]
    acc = [(mx.zeros((B, H, ql, v.shape[3]), dtype=q.dtype), mx.full((B, H, ql), -mx.inf)) for _, _, ql in qp]

    def attend(qi, ks, vs, k0, k1, mask):
        _, q0, ql = qp[qi]
        args = (q[:, :, q0 : q0 + ql], ks[:, :, k0:k1], vs[:, :, k0:k1])
        acc[qi] = fa._ext.attention_merge(*args, *acc[qi], scale=scale, mask=mask)

    for qi, k0, k1, mask in ring.tasks(ring.rank):
        attend(qi, k, v, k0, k1, mask)
    for part in range(ring_impl._PARTS):
        for t in range(1, ring.n):
            src = (ring.rank - t) % ring.n
            start, stop = ring_impl._split(ring.lengths[src], ring_impl._PARTS)[part]
            bk = mx.zeros(ring_impl._block_shape(k, stop - start), dtype=k.dtype)
            bv = mx.zeros(ring_impl._block_shape(v, stop - start), dtype=v.dtype)
            for task in ring.sub_tasks(src, start, stop):
                attend(task[0], bk, bv, *task[1:])
            mx.eval([x for a in acc for x in a])


def transfer_only(ring, k, v):
    """The forward's transfers, step by step: the ring without kernels."""
    for part in range(ring_impl._PARTS):
        for t in range(ring.n - 1):
            src = (ring.rank - t) % ring.n
            start, stop = ring_impl._split(ring.lengths[src], ring_impl._PARTS)[part]
            if t == 0:
                held = (k[:, :, start:stop], v[:, :, start:stop])
            step = ring_impl._Step(ring)
            if stop > start:
                step.send(held[0])
                step.send(held[1])
            start, stop = ring_impl._split(ring.lengths[(src - 1) % ring.n], ring_impl._PARTS)[part]
            if stop > start:
                held = (
                    step.recv(ring_impl._block_shape(k, stop - start), k.dtype),
                    step.recv(ring_impl._block_shape(v, stop - start), v.dtype),
                )
            step.run()


def free_port(n):
    for first in range(41000, 60000, 97):
        try:
            for p in range(first, first + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return first
        except OSError:
            continue
    raise RuntimeError("no free ports")


def run_procs(n, args, passthrough):
    me = [sys.executable, os.path.abspath(__file__), "--worker", *passthrough]
    if n == 1:
        cmd = me
    else:
        launch = os.path.join(os.path.dirname(sys.executable), "mlx.launch")
        cmd = [launch, "-n", str(n), "--backend", args.backend]
        if args.backend == "ring":
            cmd += ["--starting-port", str(free_port(n))]
        cmd += me
    run = subprocess.run(cmd, capture_output=True, text=True)
    tag = "RESULT "
    rows = [json.loads(line[len(tag) :]) for line in run.stdout.splitlines() if line.startswith(tag)]
    if len(rows) != n:
        raise RuntimeError(f"{n} processes returned {len(rows)} results:\n{run.stdout}\n{run.stderr}")
    return sorted(rows, key=lambda r: r["rank"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--total", type=int, default=8192, help="sequence length over all processes")
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--kv-heads", type=int, help="key/value heads (GQA); default --heads")
    p.add_argument("--hdim", type=int, default=64)
    p.add_argument("--dtype", choices=DTYPES, default="float16")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--layout", choices=["contiguous", "zigzag"], default="zigzag")
    p.add_argument("--backward", action="store_true", help="also time forward plus backward")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--backend", default="ring", help="mlx.launch backend: ring (CPU), nccl (CUDA)")
    p.add_argument("--json", help="write every process's row here (strict JSON)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)

    passthrough = [f"--total={args.total}", f"--heads={args.heads}", f"--hdim={args.hdim}",
                   f"--kv-heads={args.kv_heads or args.heads}",
                   f"--dtype={args.dtype}", f"--layout={args.layout}", f"--iters={args.iters}"]  # fmt: skip
    passthrough += ["--causal"] * args.causal + ["--backward"] * args.backward
    print(
        f"ring attention, B=1 H={args.heads}/{args.kv_heads or args.heads} L={args.total} "
        f"D={args.hdim} {args.dtype} "
        f"causal={args.causal} layout={args.layout} backend={args.backend}"
    )
    cols = ["procs", "L_per_proc", "fwd_ms", "fwd_bwd_ms", "peak_mib", "peak_vs_one", "fb_peak_mib",
            "compute_ms", "transfer_ms", "exposed_ms", "overlap"]  # fmt: skip
    print("  ".join(f"{c:>11}" for c in cols))
    results, one_peak = [], None
    for n in args.procs:
        rows = run_procs(n, args, passthrough)
        if n == 1:
            one_peak = rows[0]["peak_mib"]
        for r in rows:
            r["peak_vs_one"] = r["peak_mib"] / one_peak if one_peak else float("nan")
        results += rows
        slowest = dict(max(rows, key=lambda r: r["fwd_ms"]))
        slowest["peak_mib"] = max(r["peak_mib"] for r in rows)
        slowest["peak_vs_one"] = max(r["peak_vs_one"] for r in rows)
        if args.backward:
            slowest["fb_peak_mib"] = max(r["fb_peak_mib"] for r in rows)
        cells = [f"{n:>11}"] + [f"{slowest.get(c, float('nan')):>11.4g}" for c in cols[1:]]
        print("  ".join(cells), flush=True)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("worker", "json")}
        dump({"args": settings, "rows": results}, args.json)


if __name__ == "__main__":
    main()
