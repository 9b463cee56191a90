"""MLX 0.32.4's whole-array reduction (`all_reduce` of reduction/
reduce_all.h), unmodified, in the emulator, against float64: a sum of half
(mlx_kernels/reduce.metal's all_reduce_sumfloat16), in one pass and in two,
and an `and` of floats into bool (all_reduce_andfloat32).

The dispatch is MLX's all_reduce_dispatch (mlx/backend/metal/reduce.cpp,
read at ml-explore/mlx 846d176, version 0.32.2-dev; reduce_all.h there is
the 0.32.4 wheel's): up to 4 * 1024 elements, one threadgroup of
32 * ceil(ceil(n / 4) / 32) threads; beyond, a first pass of 128
threadgroups, each reducing a row of ceil(n / 128) elements with
32 * ceil(min(ceil(row / 4), 1024) / 32) threads into an intermediate of
the output type, then the same kernel over the 128 partial results with 32
threads (arrays under 2**26 bytes). The input at buffer 0, the output at 1,
the size at 2 and the row length at 3, both size_t.

The half sums add zeros and ones, at most 2048 ones, so that every
partial sum is an integer half represents exactly, in whatever order the
kernel adds: the result must equal the float64 count exactly, and a lost or
repeated element shows."""

import numpy as np
import pytest

from . import mlx_emu

N_READS = 4
MAX_THREADS = 1024
# The first pass's rows and the second pass's threads (reduce.cpp, < 2**26 bytes).
ROWS, SECOND_PASS_THREADS = 32 * N_READS, 32
# The largest count of ones that keeps every partial sum exact in half.
HALF_EXACT = 2048
# Sizes: one element, a partial simdgroup (1000), the most one threadgroup
# takes (4096, 1024 threads), one more (two passes, rows of 33 elements), and
# a large one (rows of 782, 224 threads).
SUM_SIZES = [1, 1000, 4096, 4097, 100003]
AND_SIZES = [1, 1000, 4096]


def single_pass_threads(n):
    return 32 * -(-(-(-n // N_READS)) // 32)


def launch(name, x, out, n, row, threads, rows=1, defines=()):
    """One pass of `name`: `rows` threadgroups of `threads` threads reduce
    rows of `row` of x's n elements into out; returns out."""
    prog = mlx_emu.load("reduce", only=name, defines=defines)
    size, row_size = np.array([n], np.uint64), np.array([row], np.uint64)
    return prog.launch(name, {0: x, 1: out, 2: size, 3: row_size}, grid=(1, rows, 1),
                       threadgroup=(threads, 1, 1))[1]


def all_reduce_sum_half(x, defines=()):
    """MLX's sum of the float16 array x, as all_reduce_dispatch runs it."""
    name, n = "all_reduce_sumfloat16", x.size
    out = np.full(1, np.float16(np.nan))
    if n <= N_READS * MAX_THREADS:
        return launch(name, x, out, n, n, single_pass_threads(n), defines=defines)
    row = -(-n // ROWS)
    threads = 32 * -(-min(-(-row // N_READS), MAX_THREADS) // 32)
    partial = launch(name, x, np.full(ROWS, np.float16(np.nan)), n, row, threads, rows=ROWS,
                     defines=defines)
    return launch(name, partial, out, ROWS, ROWS, SECOND_PASS_THREADS, defines=defines)


def sum_case(n, seed=0, defines=()):
    """(MLX's sum of n zeros and ones at random places, half of them ones
    up to 2048, the float64 count)."""
    rng = np.random.default_rng(seed)
    x = np.zeros(n, np.float16)
    x[rng.choice(n, size=min(n // 2 + 1, HALF_EXACT), replace=False)] = 1
    return all_reduce_sum_half(x, defines).astype(np.float64), np.array([x.astype(np.float64).sum()])


@pytest.mark.parametrize("n", SUM_SIZES, ids=lambda n: f"n{n}")
def test_all_reduce_sum_half_matches_reference(n):
    got, ref = sum_case(n, seed=n)
    # Every partial sum is exact in half: the sum must be the count itself.
    assert got[0] == ref[0], f"all_reduce_sumfloat16 of {n} zeros and ones: {got[0]}, not {ref[0]}"


def and_case(n, zero_at, defines=()):
    """(MLX's `and` of n nonzero floats but one zero at zero_at (None: none),
    the reference), as 0 or 1."""
    x = np.random.default_rng(n).uniform(0.5, 2.0, n).astype(np.float32)
    x[::2] *= -1
    if zero_at is not None:
        x[zero_at] = 0.0
    # A bool the kernel did not write reads 0x55: neither true nor false.
    out = launch("all_reduce_andfloat32", x, np.full(1, 0x55, np.uint8), n, n,
                 single_pass_threads(n), defines=defines)
    return out.astype(np.float64), np.array([float(zero_at is None)])


@pytest.mark.parametrize("n", AND_SIZES, ids=lambda n: f"n{n}")
def test_all_reduce_and_matches_reference(n):
    for zero_at in (None, 0, n - 1, n // 3):
        got, ref = and_case(n, zero_at)
        assert got[0] == ref[0], f"all_reduce_andfloat32 of {n}, zero at {zero_at}: {got[0]}"
