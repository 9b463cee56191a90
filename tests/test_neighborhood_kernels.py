"""The fused neighborhood kernels on problems that span many query tiles and
key blocks (test_neighborhood.py's cases fit in one GPU tile), against the
same explicit-mask reference, on every device; and what the GPU path covers.

On the GPU these run the tiled kernel (families/neighborhood/na_attention.h): several
tiles per axis and per dilation group, ragged tiles, key boxes of many
blocks, warps that skip blocks outside their windows, causal axes, and
inputs the host must copy (transposed views, a view at an odd offset)."""

import mlx.core as mx
import pytest

import mlx_fused_attn as fa
from conftest import DEVICES, device_params, rand
from test_neighborhood import check

CASES = [  # spatial, kernel, dilation, causal, dtype, head dim
    ((1000,), (63,), (1,), (False,), mx.float16, 64),
    ((700,), (9,), (3,), (False,), mx.bfloat16, 32),
    ((515,), (31,), (2,), (True,), mx.float32, 128),
    ((40, 50), (7, 13), (1, 2), (False, True), mx.float16, 64),
    ((33, 65), (5, 5), (2, 3), (False, False), mx.float32, 32),
    ((10, 12, 20), (3, 5, 7), (1, 1, 2), (False, False, False), mx.bfloat16, 128),
    ((9, 16, 17), (9, 3, 5), (1, 2, 1), (True, False, False), mx.float16, 32),
]


@device_params()
@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: "x".join(map(str, CASES[i][0])))
def test_many_tiles(device, case):
    spatial, kernel, dilation, causal, dtype, D = CASES[case]
    shape = (2,) + spatial + (2, D)
    q, k, v = (rand(shape, dtype, 100 * case + i) for i in range(3))
    ok, reason = fa.neighborhood_can_use_fused(
        q, k, v, kernel, dilation=dilation, is_causal=causal, stream=device
    )
    assert ok, reason
    out = fa.neighborhood_attention(q, k, v, kernel, dilation=dilation, is_causal=causal, stream=device)
    check(out, q, k, v, kernel, dilation, causal, D**-0.5, f"case {CASES[case][:4]} {dtype}")


@device_params()
def test_views_the_gpu_host_copies(device):
    """A [B, H, L, D] array viewed heads-last (not row-contiguous) and a
    row-contiguous view starting one element into its buffer."""
    base = rand((1, 4, 300, 64), mx.float16, 1)
    q = base.transpose(0, 2, 1, 3)
    flat = rand((1 + 300 * 4 * 64,), mx.float16, 2)
    k = flat[1:].reshape(1, 300, 4, 64)
    v = rand((1, 300, 4, 64), mx.float16, 3)
    out = fa.neighborhood_attention(q, k, v, 21, stream=device)
    check(out, q, k, v, (21,), (1,), (False,), 0.125, "views")


@pytest.mark.skipif(len(DEVICES) == 1, reason="no GPU")
def test_gpu_coverage_and_reasons():
    q = rand((1, 12, 2, 64), mx.float16, 1)
    ok, reason = fa.neighborhood_can_use_fused(q, q, q, 3, stream=mx.gpu)
    assert ok and reason == "", reason
    q80 = rand((1, 12, 2, 80), mx.float16, 1)
    ok, reason = fa.neighborhood_can_use_fused(q80, q80, q80, 3, stream=mx.gpu)
    assert not ok and "head dim 80" in reason and "32 64 128" in reason, reason
    v = rand((1, 12, 2, 32), mx.float16, 2)
    ok, reason = fa.neighborhood_can_use_fused(q, q, v, 3, stream=mx.gpu)
    assert not ok and "one head dim" in reason, reason
    # Uncovered calls still give the right answer, through the fallback.
    out = fa.neighborhood_attention(q80, q80, q80, 3, stream=mx.gpu)
    check(out, q80, q80, q80, (3,), (1,), (False,), 80**-0.5, "head dim 80 fallback")


@pytest.mark.skipif(len(DEVICES) == 1, reason="no GPU")
def test_gpu_gradients_through_the_definition():
    q, k, v = (rand((1, 20, 2, 32), mx.float32, i) for i in range(3))

    def loss(device):
        def f(q, k, v):
            return (fa.neighborhood_attention(q, k, v, 5, dilation=2, stream=device) ** 2).sum()

        return mx.grad(f, argnums=(0, 1, 2))(q, k, v)

    for g, want in zip(loss(mx.gpu), loss(mx.cpu)):
        assert mx.allclose(g, want, rtol=1e-4, atol=1e-5).item()


RUN_CASES = [  # spatial, kernel, dilation, causal, dtype, head dim, tiles a run
    ((1000,), (63,), (1,), (False,), mx.float16, 64, 3),
    ((2000,), (7,), (1,), (False,), mx.bfloat16, 64, 5),
    ((1500,), (31,), (2,), (True,), mx.float16, 64, 4),
    ((700,), (9,), (3,), (False,), mx.bfloat16, 32, 2),
    ((900,), (21,), (1,), (False,), mx.float16, 128, 3),
]


@pytest.mark.skipif(len(DEVICES) == 1, reason="no GPU")
@pytest.mark.parametrize("case", range(len(RUN_CASES)), ids=lambda i: f"run{i}")
def test_gpu_runs_of_tiles(monkeypatch, case):
    """1-D threadgroups taking runs of tiles (the ring of key blocks the
    CUDA host chooses for big inputs), forced on small ones: ragged last
    runs, dilation groups of unequal length, causal boxes."""
    spatial, kernel, dilation, causal, dtype, D, run = RUN_CASES[case]
    monkeypatch.setenv("MLX_FUSED_ATTN_NA_RUN", str(run))
    shape = (2,) + spatial + (3, D)
    q, k, v = (rand(shape, dtype, 700 + 10 * case + i) for i in range(3))
    out = fa.neighborhood_attention(q, k, v, kernel, dilation=dilation, is_causal=causal,
                                    stream=mx.gpu)
    mx.eval(out)
    check(out, q, k, v, kernel, dilation, causal, D**-0.5, f"runs {RUN_CASES[case]}")
