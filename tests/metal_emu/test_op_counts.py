"""The emulator's operation counts (emu.Program.count_ops), on kernels whose
every simdgroup matrix operation, barrier, shuffle and threadgroup-memory
byte can be counted by hand: the proxy in benchmarks/metal_proxy.py stands
on these."""

import numpy as np

from . import emu
from .test_emulator import kernels, nan_f32, shuffles_reference


def test_tiled_matmul_counts_match_its_loop():
    m, n, k = 64, 96, 48
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    dims = np.array([m, n, k], np.int32)
    grid = (n // 32, m // 32, 1)
    groups = grid[0] * grid[1]
    args = dict(constants={0: 0}, grid=grid, threadgroup=(128, 1, 1), schedule=5)
    buffers = {0: a, 1: b, 2: np.full((m, n), np.nan, np.float32), 3: dims}
    out, ops = kernels("tiled_matmul").count_ops("tiled_matmul", buffers, **args)
    np.testing.assert_allclose(out[2], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    # Counting changes no result: the checked build computes the same bits.
    np.testing.assert_array_equal(out[2], kernels("tiled_matmul").launch("tiled_matmul", buffers, **args)[2])
    steps = k // 16
    # Per threadgroup and 16-wide k step, each of the 4 simdgroups loads
    # 2 + 2 fragments and multiplies 2x2 of them, twice (kk = 0, 8); it
    # stores its 2x2 accumulators once. Two barriers a step, one at the end.
    assert ops.matrix_loads == groups * steps * 4 * 2 * 4
    assert ops.matrix_multiplies == groups * steps * 4 * 2 * 4
    assert ops.matrix_stores == groups * 4 * 4
    assert ops.barriers == groups * (2 * steps + 1)
    assert ops.shuffles == ops.reductions == ops.simdgroup_barriers == 0
    # Threadgroup memory: the A and B tiles (32x16 and 16x32 floats) written
    # once a step, C's tile written by the stores and read back once; each
    # fragment load reads 64 floats.
    assert ops.threadgroup_written == groups * (steps * 2 * 512 * 4 + 1024 * 4)
    assert ops.threadgroup_read == groups * (ops.matrix_loads // groups * 64 * 4 + 1024 * 4)
    # The device traffic is count_loads's.
    assert ops.loads[0] == emu.Loads(a.nbytes * grid[0], a.nbytes * grid[0], 0)
    assert ops.loads[2] == emu.Loads(0, 0, m * n * 4)


def test_simdgroup_functions_count_once_per_simdgroup():
    x = np.random.default_rng(1).integers(-1000, 1000, 192).astype(np.float32)
    out, ops = kernels("simd_ops").count_ops(
        "shuffles", {0: x, 1: nan_f32(192 * 8), 2: np.array([3], np.uint32)},
        grid=(3, 1, 1), threadgroup=(64, 1, 1))
    np.testing.assert_array_equal(out[1].reshape(192, 8), shuffles_reference(x, 3, 32))
    simdgroups = 3 * 2
    assert ops.by_name == {
        name: simdgroups
        for name in ("simd_shuffle", "simd_shuffle_xor", "simd_shuffle_down", "simd_shuffle_up",
                     "simd_broadcast", "simd_sum", "simd_max", "simd_min")
    }
    assert (ops.shuffles, ops.reductions) == (5 * simdgroups, 3 * simdgroups)
    assert ops.threadgroup_read == ops.threadgroup_written == 0
    assert ops.loads[0].read == x.nbytes


def test_simdgroup_matrix_moves_count_their_bytes_where_they_land():
    """A matrix loaded from and stored to device memory is no threadgroup
    traffic; a half matmul's loads are 128 bytes each."""
    M, N, K = 16, 8, 32
    rng = np.random.default_rng(2)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = rng.standard_normal((M, N)).astype(np.float16)
    out, ops = kernels("simdgroup_matrix_ops").count_ops(
        "tile_matmul_half", {0: a, 1: b, 2: c, 3: np.array([M, N, K, 0], np.uint32),
                             4: np.array([0], np.uint32)}, grid=(N // 8, M // 8, 1))
    ref = a.astype(np.float64) @ b + c
    np.testing.assert_allclose(out[2], ref, rtol=2e-2, atol=2e-2)
    tiles = (M // 8) * (N // 8)
    assert ops.by_name == {"simdgroup_load": tiles * (1 + 2 * K // 8),
                           "simdgroup_multiply_accumulate": tiles * K // 8,
                           "simdgroup_store": tiles}
    assert ops.threadgroup_read == ops.threadgroup_written == 0
    assert ops.loads[0].read == tiles * K // 8 * 64 * 2
    assert ops.loads[2].written == c.nbytes
