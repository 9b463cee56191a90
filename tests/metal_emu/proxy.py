"""A Metal speed proxy, said to be one: what a threadgroup of an attention
kernel does per key block it streams, counted in the emulator
(emu.Program.count_ops), for metal/attention.metal and for MLX's steel
attention (mx.fast's Metal kernel).

A threadgroup of either kernel owns one query block of one head and streams
every key block of the sequence through the same loop body, so its counts
are C(n) = fixed + n * per_block for n key blocks: the query tile's load
and the output's store once, the key block's work n times. Emulating L =
8192 whole is far too slow (a threadgroup is 128 fibers on one core), so
`fit` counts one threadgroup at two short key lengths and solves for the
two terms; the test checks the line on a third length. `total` then scales
to a whole non-causal call: ceil(L / bq) threadgroups a head, each
streaming ceil(L / bk) key blocks.
"""

from typing import NamedTuple

from . import emu
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
    ("simd shuffles and reductions", lambda o: o.shuffles + o.reductions + o.simdgroup_barriers),
)
# Key blocks the fit counts a threadgroup at, and the one a test checks it on.
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
    """The counters of one threadgroup of metal/attention.metal: one head,
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
