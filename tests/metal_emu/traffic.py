"""The device-memory traffic of Metal attention calls, counted in the emulator.

`fused_traffic` runs mlx_fused_attn/families/attention/attention.metal on one call in the load-counting
build (emu.Program.count_loads), checks its output against the float64
reference like every emulator case, and returns the bytes each threadgroup
reads of each input, counted once per threadgroup, and the bytes written.
`mx_fast_traffic` is the same count for mx.fast's Metal kernel, from its
source (MLX 0.32, mlx/backend/metal/kernels/steel/attn/kernels/
steel_attention.h), which the emulator cannot build: per query block it
reads the Q tile, then for every key block up to the causal limit the K and
V tiles and, with an array mask, the whole mask tile; it skips no block for
what a mask holds. Its tiles (scaled_dot_product_attention.cpp) are BQ 32
and BK 32 below head dim 128, 16 from it: at head dim 64 ours are the same,
so unmasked calls move the same bytes and the masks make the difference.

Masks are those of benchmarks/gpu_bench.py's workload rows: `mask_pattern`.
"""

from typing import NamedTuple

import numpy as np

from . import emu
from .test_attention_kernel import METAL, kernel_for, run_case

# Buffer indices of mlx_fused_attn/families/attention/attention.metal.
INPUTS = {"q": 0, "k": 1, "v": 2, "mask": 5, "classes": 11}
OUT = 3
# The query tile of mx.fast's Metal kernel in MLX 0.32 (its key tile: mx_fast_traffic).
MX_FAST_BQ = 32


class Traffic(NamedTuple):
    """Bytes read of each input (name: bytes) and bytes written."""

    read: dict
    written: int

    @property
    def total(self):
        return sum(self.read.values()) + self.written


def mask_pattern(kind, L_q, L_k, heads=1, seed=0):
    """(mask kind for cases.run_case, float32 or bool array [heads, L_q, L_k])
    for the workload masks of benchmarks/gpu_bench.py (host_mask):
    "random bool" / "random add": about a quarter of keys hidden at random,
    the diagonal shown (additive: 0 or -1e4); "causal": mlx-lm's causal mask
    as an array; "window N": with a sliding window of N keys; "alibi":
    ALiBi's causal bias, a value for every key distance; "padding": causal
    with the first L_k // 3 keys hidden (one entry of batched generation)."""
    rng = np.random.default_rng(seed)
    i = np.arange(L_q)[:, None] + L_k - L_q
    j = np.arange(L_k)[None, :]
    shape = (heads, L_q, L_k)
    if kind.startswith("random"):
        keep = rng.random(shape) > 0.25
        rows = np.arange(L_q)
        keep[:, rows, np.minimum(rows + L_k - L_q, L_k - 1)] = True
        if kind == "random bool":
            return "bool", keep
        return "additive", np.where(keep, 0.0, -1e4).astype(np.float32)
    if kind == "alibi":
        slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
        bias = -slopes[:, None, None] * (i - j)
        return "additive", np.where(j <= i, bias, -np.inf).astype(np.float32)
    keep = j <= i
    if kind.startswith("window"):
        keep &= j > i - int(kind.split()[1])
    elif kind == "padding":
        keep &= j >= L_k // 3
    else:
        assert kind == "causal", kind
    return "bool", np.broadcast_to(keep, shape).copy()


def fused_traffic(prog, *, dtype="float16", D=64, H_q=2, L_q, L_k, causal=False, mask=None, seed=0):
    """The traffic of the fused Metal kernel on one call (B = 1): `mask` is
    None or (kind, array [heads, L_q, L_k]) as mask_pattern gives; the
    mask's classes by block are bound (the host always builds them for an
    array mask on Metal). Runs the kernel in the load-counting build and
    checks its output."""
    name, bq, bk, warps = kernel_for(prog, dtype, D, D)
    got = {}

    def dispatch(buffers, constants, schedule, race_check):
        out, got["loads"] = prog.count_loads(
            name, buffers, constants=constants, grid=(-(-L_q // bq), H_q, 1),
            threadgroup=(32, warps, 1), schedule=schedule)
        return out

    case = {}
    if mask is not None:
        kind, values = mask

        def edit(inputs):
            inputs["mask"] = values.copy()

        case = {"mask": kind, "mask_shape": values.shape, "edit": edit}
    run_case(prog, dtype=dtype, D=D, H_q=H_q, L_q=L_q, L_k=L_k, causal=causal, seed=seed,
             dispatch=dispatch, **case)
    loads = got["loads"]
    read = {n: loads[i].distinct for n, i in INPUTS.items() if i in loads}
    return Traffic(read, loads[OUT].written)


def mx_fast_traffic(*, dtype="float16", D=64, H_q=2, L_q, L_k, causal=False, mask=None):
    """The same count for mx.fast's Metal kernel (MLX 0.32 steel attention),
    from its loop: see the module's docstring. `mask` as for fused_traffic."""
    item = np.dtype(np.float32 if dtype == "float32" else np.float16).itemsize
    bq, bk = MX_FAST_BQ, 32 if D < 128 else 16
    mask_item = 0 if mask is None else (1 if mask[0] == "bool" else item)
    q = kv = m = 0
    for qb in range(-(-L_q // bq)):
        rows = min(bq, L_q - qb * bq)
        q += rows * D * item
        blocks = -(-L_k // bk)
        if causal:
            blocks = min(blocks, -(-((qb + 1) * bq + L_k - L_q) // bk))
        for kb in range(blocks):
            cols = min(bk, L_k - kb * bk)
            kv += cols * D * item
            m += rows * cols * mask_item
    read = {"q": H_q * q, "k": H_q * kv, "v": H_q * kv}
    if mask is not None:
        read["mask"] = H_q * m
    return Traffic(read, H_q * L_q * D * item)


def program():
    return emu.load(METAL)
