"""The speed proxy's per-key-block fit (proxy.py): a threadgroup's counts
are a line in the number of key blocks it streams, and the line's slope is
the work of one block, so scaling a short run to L = 8192 is sound."""

import pytest

from . import proxy


@pytest.fixture(scope="module")
def prog():
    return proxy.program()


@pytest.mark.parametrize("dtype,D", [("float16", 64), ("bfloat16", 128)])
def test_fused_counts_are_linear_in_key_blocks(prog, dtype, D):
    fit = proxy.fused_fit(prog, dtype, D)
    assert proxy.fused_counts(prog, dtype, D, 7) == fit.at(7)
    bq, bk = fit.tiles.bq, fit.tiles.bk
    # Per key block, S = Q K^T and O += P V: bq x bk x D multiply-adds each,
    # 8 x 8 x 8 a simdgroup MMA. K and V tiles come from device memory once.
    assert fit.per_block["simdgroup MMAs"] == 2 * bq * bk * D // 512
    assert fit.per_block["device bytes loaded"] == 2 * bk * D * 2
    assert fit.per_block["threadgroup bytes stored"] >= 2 * bk * D * 2
