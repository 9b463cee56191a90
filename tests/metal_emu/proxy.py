"""A Metal speed proxy, said to be one: what a threadgroup of an attention
kernel does per key block it streams, counted in the emulator
(emu.Program.count_ops), for mlx_fused_attn/families/attention/attention.metal and for MLX's steel
attention (mx.fast's Metal kernel).

A threadgroup of either kernel owns one query block of one head and streams
every key block of the sequence through the same loop body, so its counts
are C(n) = fixed + n * per_block for n key blocks: the query tile's load
and the output's store once, the key block's work n times. Emulating a
whole call at L = 8192 (256 threadgroups a head, each streaming 256 or 512
key blocks, as 128 fibers on one core) is far too slow, so
`fit` counts one threadgroup at two short key lengths and solves for the
two terms; test_proxy.py checks the line on a third length and
benchmarks/metal_proxy.py on a threadgroup of the longest call it
reports. `total` then scales to a whole non-causal call: ceil(L / bq)
threadgroups a head, each streaming ceil(L / bk) key blocks.
"""

import os
from typing import NamedTuple

import numpy as np

from . import cases, emu, mlx_emu
from .mlx_params import AttnParams as MlxAttnParams
from .test_attention_kernel import METAL, kernel_for, run_case

# What the proxy counts, each from one launch's emu.Ops: (name, getter).
# Device bytes are the q, k and v buffers' (0, 1 and 2 in both kernels), as
# every thread read them, with no cache.
COUNTERS = (
    ("simdgroup MMAs", lambda o: o.matrix_multiplies),
    ("simdgroup matrix loads", lambda o: o.matrix_loads),
    ("simdgroup matrix stores", lambda o: o.matrix_stores),
    ("threadgroup bytes loaded", lambda o: o.threadgroup_read),
    ("threadgroup bytes stored", lambda o: o.threadgroup_written),
    ("device bytes loaded", lambda o: sum(o.loads[i].read for i in (0, 1, 2))),
    ("threadgroup barriers", lambda o: o.barriers),
    ("simdgroup barriers", lambda o: o.simdgroup_barriers),
    ("simd shuffles and reductions", lambda o: o.shuffles + o.reductions),
)
# Key blocks the fit counts a threadgroup at.
FIT_BLOCKS = (2, 4)


class Tiles(NamedTuple):
    """A kernel's instance for one case: host name, query and key block
    sizes, simdgroups a threadgroup."""

    name: str
    bq: int
    bk: int
    warps: int


class Fit(NamedTuple):
    """Per counter name: what one threadgroup does once, and per key block."""

    tiles: Tiles
    fixed: dict
    per_block: dict

    def at(self, blocks):
        """One threadgroup's counts streaming `blocks` key blocks."""
        return {n: self.fixed[n] + blocks * self.per_block[n] for n in self.fixed}

    def total(self, L, heads=1):
        """A whole non-causal self-attention call of length L."""
        groups = heads * -(-L // self.tiles.bq)
        return {n: groups * v for n, v in self.at(-(-L // self.tiles.bk)).items()}


def counters(ops):
    return {name: get(ops) for name, get in COUNTERS}


def fused_tiles(prog, dtype, D):
    return Tiles(*kernel_for(prog, dtype, D, D))


def fused_counts(prog, dtype, D, blocks):
    """The counters of one threadgroup of mlx_fused_attn/families/attention/attention.metal: one head,
    one query block, `blocks` key blocks, no mask; its output is checked
    against the float64 reference."""
    tiles = fused_tiles(prog, dtype, D)
    got = {}

    def dispatch(buffers, constants, schedule, race_check):
        out, got["ops"] = prog.count_ops(
            tiles.name, buffers, constants=constants, grid=(1, 1, 1),
            threadgroup=(32, tiles.warps, 1), schedule=schedule)
        return out

    run_case(prog, dtype=dtype, D=D, H_q=1, L_q=tiles.bq, L_k=blocks * tiles.bk, dispatch=dispatch)
    return counters(got["ops"])


def fit(count, tiles, blocks=FIT_BLOCKS):
    """Fit of count(n key blocks) -> counters over the two lengths `blocks`."""
    lo, hi = blocks
    c_lo, c_hi = count(lo), count(hi)
    per_block = {n: (c_hi[n] - c_lo[n]) / (hi - lo) for n in c_lo}
    return Fit(tiles, {n: c_lo[n] - lo * per_block[n] for n in c_lo}, per_block)


def fused_fit(prog, dtype, D, blocks=FIT_BLOCKS):
    return fit(lambda n: fused_counts(prog, dtype, D, n), fused_tiles(prog, dtype, D), blocks)


def program():
    return emu.load(METAL)


# ---------------------------------------------------------------------------
# MLX's steel attention as mx.fast dispatches it on M1-M4 GPUs
# (scaled_dot_product_attention.cpp, sdpa_full_self_attention_metal: bq 32,
# bk 32 below head dim 128 and 16 from it, 4 x 1 simdgroups; the NAX kernel
# of GPUs with neural accelerators is another).

MLX_UNIT = os.path.join(emu.EMU_DIR, "proxy_kernels", "steel_attention.metal")
# Function constants of steel_attention.h.
MLX_FC = {"align_Q": 200, "align_K": 201, "has_mask": 300, "do_causal": 301, "has_sinks": 302,
          "save_lse": 303}
MLX_TYPE_NAMES = {"float16": "float16", "bfloat16": "bfloat16"}


def mlx_tiles(dtype, D):
    bk = 32 if D < 128 else 16
    t = MLX_TYPE_NAMES[dtype]
    return Tiles(f"steel_attention_{t}_bq32_bk{bk}_bd{D}_bv{D}_wm4_wn1_mask{t}", 32, bk, 4)


def mlx_program(dtype, D):
    """The instance of MLX_UNIT for (dtype, D), built as mlx_emu.load builds
    MLX's units (MLX's headers first, at program scope); skips the calling
    test where the headers cannot be had."""
    include, reason = mlx_emu.mlx_include()
    if include is None:
        import pytest

        pytest.skip(reason)
    return emu.load(MLX_UNIT, only=mlx_tiles(dtype, D).name,
                    include_dirs=(mlx_emu.EMU_INCLUDE, include), unnamed_namespace=False)


def mlx_counts(prog, dtype, D, blocks, seed=0):
    """The counters of one threadgroup of MLX's kernel: one head, one query
    block, `blocks` key blocks, no mask, bound as sdpa_full_self_attention_metal
    binds them; its output is checked against the float64 reference."""
    tiles = mlx_tiles(dtype, D)
    L_q, L_k = tiles.bq, blocks * tiles.bk
    rng = np.random.default_rng(seed)
    q, q64 = cases.to_device(rng.standard_normal((1, 1, L_q, D)), dtype)
    k, k64 = cases.to_device(rng.standard_normal((1, 1, L_k, D)), dtype)
    v, v64 = cases.to_device(rng.standard_normal((1, 1, L_k, D)), dtype)
    scale = 1.0 / np.sqrt(D)
    params = MlxAttnParams(
        B=1, H=1, D=D, qL=L_q, kL=L_k, gqa_factor=1, scale=scale, NQ=1, NK=blocks,
        NQ_aligned=1, NK_aligned=blocks, qL_rem=0, kL_rem=0, qL_off=L_k - L_q,
        Q_strides=(L_q * D, L_q * D, D), K_strides=(L_k * D, L_k * D, D),
        V_strides=(L_k * D, L_k * D, D), O_strides=(L_q * D, L_q * D, D))
    out = np.full_like(q, cases.poison(dtype))
    constants = {i: False for i in MLX_FC.values()}
    constants.update({MLX_FC["align_Q"]: True, MLX_FC["align_K"]: True})
    res, ops = prog.count_ops(
        tiles.name, {0: q, 1: k, 2: v, 3: out, 4: params}, constants=constants,
        threadgroup=(32, tiles.warps, 1))
    ref = cases.reference(q64, k64, v64, scale, dtype)
    cases.check(cases.from_device(res[3], dtype), ref, dtype, f"{tiles.name} L_k={L_k}")
    return counters(ops)


def mlx_fit(prog, dtype, D, blocks=FIT_BLOCKS):
    return fit(lambda n: mlx_counts(prog, dtype, D, n), mlx_tiles(dtype, D), blocks)
