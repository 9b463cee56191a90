"""One process of tests/test_ring_attention.py, started by ``mlx.launch``.

Every rank builds the same whole sequence from the case's seed, runs
``ring_attention`` on its part, and checks its output and its gradients
(of the sum of every rank's loss) against the one-process fused call on the
whole sequence and against float64 plain MLX ops; it prints ``rank R PASS``
per case, or raises. ``die`` (the process ends) and ``stall`` (alive, never
taking part) make rank 1 drop out of the ring for the failure tests.

    mlx.launch -n 2 --backend ring tests/ring_worker.py checks
"""

import os
import sys
import time

import mlx.core as mx
import numpy as np

import mlx_fused_attn as fa

# (name, heads q/kv, D, D_v, lengths per rank or None, total, causal, layout, dtype)
CASES = {
    2: [
        ("mha", (4, 4), 32, 32, None, 96, False, "contiguous", mx.float32),
        ("gqa causal uneven", (4, 2), 32, 32, [45, 19], None, True, "contiguous", mx.float32),
        ("gqa zigzag causal", (6, 2), 16, 24, None, 77, True, "zigzag", mx.float32),
        ("uneven", (2, 1), 32, 32, [30, 51], None, False, "contiguous", mx.float32),
        ("float16 causal", (4, 2), 64, 64, None, 512, True, "contiguous", mx.float16),
        # A block shorter than ring._PARTS: one of its sub-blocks is empty.
        ("tiny block causal", (2, 1), 16, 16, [3, 29], None, True, "contiguous", mx.float32),
    ],
    4: [
        ("gqa causal uneven", (4, 2), 32, 32, [21, 40, 9, 33], None, True, "contiguous", mx.float32),
        ("zigzag causal", (2, 1), 32, 32, None, 101, True, "zigzag", mx.float32),
        ("mha", (3, 3), 16, 16, [17, 23, 31, 12], None, False, "contiguous", mx.float32),
        ("bfloat16 zigzag causal", (4, 1), 64, 64, None, 512, True, "zigzag", mx.bfloat16),
    ],
}
# Errors allowed against float64, as the fused one-process call's error
# times 2 plus a floor per dtype (outputs and gradients of magnitude ~1).
FLOOR = {mx.float32: 2e-5, mx.float16: 4e-3, mx.bfloat16: 3e-2}


def plain64(q, k, v, scale, causal):
    """Attention in float64 MLX ops (the reference, differentiable)."""
    group = q.shape[1] // k.shape[1]
    k, v = mx.repeat(k, group, axis=1), mx.repeat(v, group, axis=1)
    s = scale * (q @ k.swapaxes(-1, -2))
    if causal:
        L = q.shape[2]
        s = mx.where(mx.tril(mx.ones((L, L), dtype=mx.bool_)), s, -np.inf)
    return mx.softmax(s, axis=-1, precise=True) @ v


def part(x, rank, size, lengths, layout):
    if lengths is None:
        return fa.ring_shard(x, rank, size, layout=layout)
    start = sum(lengths[:rank])
    return x[:, :, start : start + lengths[rank]]


def err(a, b):
    return float(np.abs(np.array(a.astype(mx.float64)) - np.array(b.astype(mx.float64))).max())


def check(case, group):
    name, (hq, hk), D, Dv, lengths, total, causal, layout, dtype = case
    rank, size = group.rank(), group.size()
    total = sum(lengths) if lengths else total
    key = mx.random.key(sum(map(ord, name)) + size)
    kq, kk, kv, kw = mx.random.split(key, 4)
    q = mx.random.normal((1, hq, total, D), key=kq).astype(dtype)
    k = mx.random.normal((1, hk, total, D), key=kk).astype(dtype)
    v = mx.random.normal((1, hk, total, Dv), key=kv).astype(dtype)
    w = mx.random.normal((1, hq, total, Dv), key=kw)
    scale = D**-0.5
    mask = "causal" if causal else None
    # Cross lengths: each rank's queries are a slice of their own length.
    mine = lambda x: part(x, rank, size, lengths, layout)  # noqa: E731

    def ring_loss(q_r, k_r, v_r):
        out = fa.ring_attention(q_r, k_r, v_r, scale=scale, causal=causal, group=group, layout=layout)
        return (out.astype(mx.float32) * mine(w)).sum(), out

    (_, out), grads = mx.value_and_grad(ring_loss, argnums=(0, 1, 2))(mine(q), mine(k), mine(v))
    mx.eval(out, grads)

    def fused_loss(q, k, v):
        out = fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
        return (out.astype(mx.float32) * w).sum(), out

    (_, f_out), f_grads = mx.value_and_grad(fused_loss, argnums=(0, 1, 2))(q, k, v)

    def ref_loss(q, k, v):
        out = plain64(q, k, v, scale, causal)
        return (out * w.astype(mx.float64)).sum(), out

    up = lambda x: x.astype(mx.float64)  # noqa: E731
    with mx.stream(mx.cpu):
        (_, r_out), r_grads = mx.value_and_grad(ref_loss, argnums=(0, 1, 2))(up(q), up(k), up(v))
    for what, got, fused, ref in zip(
        ("out", "dq", "dk", "dv"), (out, *grads), (f_out, *f_grads), (r_out, *r_grads)
    ):
        fused_r, ref_r = mine(fused), mine(ref)
        scale_ref = max(1.0, float(mx.abs(ref_r).max()))
        bound = 2 * err(fused_r, ref_r) + FLOOR[dtype] * scale_ref
        e = err(got, ref_r)
        assert got.shape == ref_r.shape, f"{name} {what}: shape {got.shape} != {ref_r.shape}"
        assert e <= bound, (
            f"rank {rank} of {size}, {name}: {what} error {e:.3g} against float64 > "
            f"{bound:.3g} (the one-process fused call's error {err(fused_r, ref_r):.3g})"
        )
    print(f"rank {rank} PASS {name}", flush=True)


def main():
    mode = sys.argv[1]
    group = mx.distributed.init()
    rank, size = group.rank(), group.size()
    if mode == "checks":
        for case in CASES[size]:
            check(case, group)
        return
    # Failure modes: rank 1 drops out before the ring's first transfer.
    q = mx.random.normal((1, 2, 4096, 64))
    if rank == 1:
        if mode == "die":
            # Exit status 0: mlx.launch stops the others at once after a
            # failure exit, so the others' own error shows only after this.
            os._exit(0)
        time.sleep(600)  # "stall"
    with fa.ring_deadline(float(sys.argv[2])):
        mx.eval(fa.ring_attention(q, q, q, causal=True, group=group))
    print(f"rank {rank} finished without its peer", flush=True)


if __name__ == "__main__":
    main()
