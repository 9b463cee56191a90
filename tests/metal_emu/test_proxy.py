"""The speed proxy's per-key-block fit (proxy.py): a threadgroup's counts
are a line in the number of key blocks it streams, and the line's slope is
the work of one block, so scaling a short run to L = 8192 is sound. For our
kernel and MLX's steel attention alike."""

import pytest

from . import proxy

CASES = [("float16", 64), ("bfloat16", 128)]


@pytest.fixture(scope="module")
def ours():
    return proxy.program()


def check_fit(fit, count, D):
    """fit against a third length, and the work every attention kernel of
    these tiles must do per key block."""
    assert count(7) == fit.at(7)
    bq, bk = fit.tiles.bq, fit.tiles.bk
    # S = Q K^T and O += P V: bq x bk x D multiply-adds each, 8 x 8 x 8 a
    # simdgroup MMA. The K and V tiles (2-byte elements) come from device
    # memory once and go through threadgroup memory.
    assert fit.per_block["simdgroup MMAs"] == 2 * bq * bk * D // 512
    assert fit.per_block["device bytes loaded"] == 2 * bk * D * 2
    assert fit.per_block["threadgroup bytes stored"] >= 2 * bk * D * 2
    # Every simdgroup reads all of K and V from threadgroup memory.
    assert fit.per_block["threadgroup bytes loaded"] >= fit.tiles.warps * 2 * bk * D * 2


@pytest.mark.parametrize("dtype,D", CASES)
def test_fused_counts_are_linear_in_key_blocks(ours, dtype, D):
    check_fit(proxy.fused_fit(ours, dtype, D), lambda n: proxy.fused_counts(ours, dtype, D, n), D)


@pytest.mark.parametrize("dtype,D", CASES)
def test_mlx_counts_are_linear_in_key_blocks(dtype, D):
    prog = proxy.mlx_program(dtype, D)
    check_fit(proxy.mlx_fit(prog, dtype, D), lambda n: proxy.mlx_counts(prog, dtype, D, n), D)
