"""Forward correctness of the fused op against a float64 reference."""

import itertools

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import DTYPES, assert_close, device_params, rand

LENGTHS = [1, 7, 32, 33, 64, 65, 127, 256, 1000]
HEAD_DIMS = [32, 64, 72, 80, 96, 128, 192, 256]
# Head dims added for Gemma (256), the rest of MLX's Metal list (72, 192) and
# DeepSeek's multi-head latent attention (q and k 192, v 128): (D, D_v).
LARGE_HEAD_DIMS = [(72, 72), (192, 128), (192, 192), (256, 256)]


def make(B, Hq, Hk, Lq, Lk, D, dtype, seed, Dv=None):
    q = rand((B, Hq, Lq, D), dtype, seed)
    k = rand((B, Hk, Lk, D), dtype, seed + 1)
    v = rand((B, Hk, Lk, Dv or D), dtype, seed + 2)
    return q, k, v


def make_mask(kind, B, Hq, Lq, Lk, dtype, seed):
    if kind is None or kind == "causal":
        return kind
    key = mx.random.key(seed + 3)
    if kind == "bool":
        return mx.random.uniform(shape=(B, Hq, Lq, Lk), key=key) > 0.3
    if kind == "bool_broadcast":
        return mx.random.uniform(shape=(Lq, Lk), key=key) > 0.3
    if kind == "additive":
        return mx.random.normal((B, 1, Lq, Lk), key=key).astype(dtype)
    raise ValueError(kind)


MASKS = [None, "causal", "bool", "bool_broadcast", "additive"]


@device_params()
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("D", HEAD_DIMS)
def test_head_dims(device, dtype, D):
    for i, mask in enumerate(MASKS):
        q, k, v = make(2, 4, 2, 65, 127, D, dtype, seed=10 * D + i)
        m = make_mask(mask, 2, 4, 65, 127, dtype, seed=i)
        out = fa.scaled_dot_product_attention(q, k, v, scale=D**-0.5, mask=m, stream=device)
        assert out.dtype == dtype
        assert_close(out, q, k, v, D**-0.5, m, what=f"D={D} mask={mask}")


@device_params()
@pytest.mark.parametrize("L", LENGTHS)
def test_lengths(device, L):
    for i, (mask, dtype) in enumerate(itertools.product(MASKS, [mx.float16, mx.float32])):
        q, k, v = make(1, 2, 2, L, L, 64, dtype, seed=L + 100 * i)
        m = make_mask(mask, 1, 2, L, L, dtype, seed=i)
        out = fa.scaled_dot_product_attention(q, k, v, scale=0.125, mask=m, stream=device)
        assert_close(out, q, k, v, 0.125, m, what=f"L={L} mask={mask} {dtype}")


@device_params()
@pytest.mark.parametrize("Lq,Lk", [(1, 1000), (32, 7), (7, 32), (33, 256), (256, 33), (1000, 65)])
@pytest.mark.parametrize("mask", MASKS)
def test_unequal_lengths(device, Lq, Lk, mask):
    q, k, v = make(2, 2, 1, Lq, Lk, 64, mx.float16, seed=Lq * Lk)
    m = make_mask(mask, 2, 2, Lq, Lk, mx.float16, seed=Lq)
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.125, mask=m, stream=device)
    assert_close(out, q, k, v, 0.125, m, what=f"Lq={Lq} Lk={Lk} mask={mask}")


@device_params()
@pytest.mark.parametrize("group", [1, 2, 4, 8])
@pytest.mark.parametrize("sinks", [False, True])
def test_gqa_and_sinks(device, group, sinks):
    Hk = 2
    q, k, v = make(2, Hk * group, Hk, 65, 100, 64, mx.bfloat16, seed=group)
    s = rand((Hk * group,), mx.bfloat16, seed=7, scale=2.0) if sinks else None
    for mask in MASKS:
        m = make_mask(mask, 2, Hk * group, 65, 100, mx.bfloat16, seed=group)
        out = fa.scaled_dot_product_attention(
            q, k, v, scale=0.125, mask=m, sinks=s, stream=device
        )
        assert_close(out, q, k, v, 0.125, m, s, what=f"group={group} mask={mask}")


@device_params()
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("D,Dv", LARGE_HEAD_DIMS)
def test_large_head_dims_run_fused(device, dtype, D, Dv):
    """The fused kernel of every backend takes these (force_fused raises
    where it would fall back), with GQA, sinks, every mask and ragged
    lengths past the short kernel's 64."""
    q, k, v = make(2, 4, 2, 65, 127, D, dtype, seed=D + Dv, Dv=Dv)
    s = rand((4,), dtype, seed=7, scale=2.0)
    for i, mask in enumerate(MASKS):
        m = make_mask(mask, 2, 4, 65, 127, dtype, seed=i)
        ok, reason = fa.can_use_fused(q, k, v, scale=D**-0.5, mask=m, sinks=s, stream=device)
        assert ok, reason
        out = fa.scaled_dot_product_attention(
            q, k, v, scale=D**-0.5, mask=m, sinks=s, force_fused=True, stream=device
        )
        assert out.shape == (2, 4, 65, Dv)
        assert_close(out, q, k, v, D**-0.5, m, s, what=f"D={D} Dv={Dv} mask={mask}")


@device_params()
def test_value_head_dim_differs(device):
    q, k, v = make(1, 4, 4, 40, 50, 64, mx.float32, seed=3, Dv=32)
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.125, mask="causal", stream=device)
    assert out.shape == (1, 4, 40, 32)
    assert_close(out, q, k, v, 0.125, "causal")


@device_params()
def test_transposed_and_sliced_inputs(device):
    # tpose: [B, L, H, D] viewed as [B, H, L, D], read without a copy.
    B, L, H, D = 2, 77, 4, 64
    base = [rand((B, L, H, D), mx.float16, seed=s) for s in range(3)]
    q, k, v = (x.transpose(0, 2, 1, 3) for x in base)
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.125, mask="causal", stream=device)
    assert_close(out, q, k, v, 0.125, "causal", what="transposed")
    # Strided slices along every axis, including a non-unit head-dim stride.
    big = rand((3, 6, 150, 2 * D), mx.float32, seed=9)
    q = big[::2, ::2, 10:140, ::2]
    k = big[1:, 1::2, ::3, :D]
    v = big[1:, ::2, ::3, D:]
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.1, stream=device)
    assert_close(out, q, k, v, 0.1, what="sliced")


@device_params()
def test_fully_masked_rows_match_mx_fast(device):
    q, k, v = make(1, 2, 2, 8, 6, 32, mx.float32, seed=5)
    rows = np.ones((8, 6), bool)
    rows[[1, 4]] = False
    bool_mask = mx.array(rows)
    add_mask = mx.where(bool_mask, 0.0, -float("inf"))
    sinks = mx.array([0.5, -1.0])
    for m, s in [(bool_mask, None), (add_mask, None), (bool_mask, sinks), (add_mask, sinks)]:
        out = fa.scaled_dot_product_attention(q, k, v, scale=0.3, mask=m, sinks=s, stream=device)
        want = mx.fast.scaled_dot_product_attention(
            q, k, v, scale=0.3, mask=m, sinks=s, stream=mx.cpu
        )
        np.testing.assert_allclose(np.array(out), np.array(want), rtol=1e-5, atol=1e-6)
    # Causal with L_q > L_k: the first L_q - L_k rows see no key.
    q, k, v = make(1, 2, 2, 70, 20, 32, mx.float32, seed=6)
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.3, mask="causal", stream=device)
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask="causal", stream=mx.cpu)
    np.testing.assert_allclose(np.array(out), np.array(want), rtol=1e-5, atol=1e-6)


@device_params()
@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_large_logits_do_not_overflow(device, dtype):
    # q k^T reaches ~1e5, past float16's 65504, before the scale brings it back.
    q = rand((1, 2, 64, 64), dtype, seed=1, scale=40.0)
    k = rand((1, 2, 96, 64), dtype, seed=2, scale=40.0)
    v = rand((1, 2, 96, 64), dtype, seed=3)
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.125, stream=device)
    assert not np.isnan(np.array(out.astype(mx.float32))).any()
    assert_close(out, q, k, v, 0.125, what="large logits")


@device_params()
def test_nan_propagates(device):
    q, k, v = make(1, 1, 1, 40, 70, 64, mx.float32, seed=8)
    qn = np.array(q)
    qn[0, 0, 5, 3] = np.nan
    out = np.array(fa.scaled_dot_product_attention(mx.array(qn), k, v, scale=0.1, stream=device))
    assert np.isnan(out[0, 0, 5]).all()
    assert not np.isnan(np.delete(out[0, 0], 5, axis=0)).any()
    vn = np.array(v)
    vn[0, 0, 17, 0] = np.nan
    out = np.array(fa.scaled_dot_product_attention(q, k, mx.array(vn), scale=0.1, stream=device))
    assert np.isnan(out[0, 0, :, 0]).all() and not np.isnan(out[0, 0, :, 1:]).any()


@device_params()
def test_fused_path_is_taken(device):
    q, k, v = make(1, 2, 2, 64, 64, 64, mx.float16, seed=1)
    ok, reason = fa.can_use_fused(q, k, v, scale=1.0, stream=device)
    if device == mx.cpu:
        assert ok and reason == ""
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.1, force_fused=ok, stream=device)
    assert_close(out, q, k, v, 0.1)


def test_float64_falls_back_with_reason():
    q = mx.random.normal((1, 2, 16, 32), stream=mx.cpu).astype(mx.float64, stream=mx.cpu)
    ok, reason = fa.can_use_fused(q, q, q, scale=1.0, stream=mx.cpu)
    assert not ok and "float64" in reason
    with pytest.raises(ValueError, match="float64"):
        fa.scaled_dot_product_attention(q, q, q, scale=1.0, force_fused=True, stream=mx.cpu)
    out = fa.scaled_dot_product_attention(q, q, q, scale=0.2, stream=mx.cpu)
    want = mx.fast.scaled_dot_product_attention(q, q, q, scale=0.2, stream=mx.cpu)
    np.testing.assert_allclose(np.array(out), np.array(want), rtol=1e-12)
