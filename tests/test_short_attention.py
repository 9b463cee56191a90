"""Short sequences (L_q, L_k <= 64) with many (batch, head) pairs: on a GPU
they run the short-sequence kernel (kernels/short_attention.h), which holds
several sequences whole per threadgroup, so these cases use sequence counts
that leave the last threadgroup partial. On the CPU they check the CPU
kernel at the same shapes. Reference and tolerance: conftest.py."""

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import DEVICES, DTYPES, assert_close, device_params, rand

LENGTHS = [1, 8, 16, 17, 31, 32, 48, 63, 64]
MASKS = [None, "causal", "bool", "additive"]


def make(B, Hq, Hk, Lq, Lk, D, dtype, seed, Dv=None):
    return (
        rand((B, Hq, Lq, D), dtype, seed),
        rand((B, Hk, Lk, D), dtype, seed + 1),
        rand((B, Hk, Lk, Dv or D), dtype, seed + 2),
    )


def make_mask(kind, shape, dtype, seed):
    if kind is None or kind == "causal":
        return kind
    key = mx.random.key(seed + 3)
    if kind == "bool":
        return mx.random.uniform(shape=shape, key=key) > 0.3
    return mx.random.normal(shape, key=key).astype(dtype)


def run(q, k, v, scale, mask, device, sinks=None):
    return fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask, sinks=sinks, stream=device)


def on_gpu(device):
    return device != mx.cpu


@device_params()
@pytest.mark.parametrize("L", LENGTHS)
def test_lengths(device, L):
    """B * H = 35 sequences: not a multiple of any sequences-per-threadgroup
    count above 1, so every capacity has a partial last threadgroup."""
    for i, (mask, dtype) in enumerate(
        [(m, t) for m in MASKS for t in (mx.float16, mx.bfloat16, mx.float32)]
    ):
        q, k, v = make(5, 7, 7, L, L, 64, dtype, seed=L + 100 * i)
        m = make_mask(mask, (5, 7, L, L), dtype, seed=i)
        out = run(q, k, v, 0.125, m, device)
        assert out.dtype == dtype
        assert_close(out, q, k, v, 0.125, m, what=f"L={L} mask={mask} {dtype}")


@device_params()
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("D", [32, 64, 128])
def test_head_dims(device, dtype, D):
    """Every capacity (16, 32, 48, 64 rows) at every head dim and dtype."""
    for L_q, L_k in [(13, 16), (32, 21), (40, 47), (64, 55)]:
        q, k, v = make(3, 3, 3, L_q, L_k, D, dtype, seed=D + L_q)
        out = run(q, k, v, D**-0.5, "causal", device)
        assert_close(out, q, k, v, D**-0.5, "causal", what=f"D={D} L_q={L_q} L_k={L_k}")


@device_params()
@pytest.mark.parametrize("L_q,L_k", [(1, 64), (64, 1), (17, 40), (40, 17), (5, 33)])
@pytest.mark.parametrize("mask", MASKS)
def test_unequal_lengths(device, L_q, L_k, mask):
    """Causal with L_q > L_k leaves the first rows without keys: like
    mx.fast they average V."""
    q, k, v = make(2, 5, 5, L_q, L_k, 32, mx.float16, seed=L_q * 100 + L_k)
    m = make_mask(mask, (L_q, L_k), mx.float16, seed=L_k)
    assert_close(run(q, k, v, 0.2, m, device), q, k, v, 0.2, m, what=f"{L_q}x{L_k} {mask}")


@device_params()
@pytest.mark.parametrize("group", [1, 2, 5])
@pytest.mark.parametrize("sinks", [False, True])
def test_gqa_and_sinks(device, group, sinks):
    q, k, v = make(3, 10, 10 // group, 24, 30, 64, mx.bfloat16, seed=group)
    s = rand((10,), mx.bfloat16, 7) if sinks else None
    m = make_mask("bool", (3, 1, 24, 30), mx.bfloat16, seed=group)
    out = run(q, k, v, 0.125, m, device, sinks=s)
    assert_close(out, q, k, v, 0.125, m, s, what=f"group={group} sinks={sinks}")


@device_params()
def test_many_sequences(device):
    """2997 sequences (odd: the last threadgroup holds fewer)."""
    q, k, v = make(999, 3, 3, 17, 17, 64, mx.float16, seed=3)
    assert_close(run(q, k, v, 0.125, None, device), q, k, v, 0.125, what="B=999")


@device_params()
def test_batch_past_the_general_grid_limit(device):
    """B = 66000 is past the 65535 the general CUDA kernel's grid allows; the
    short kernel numbers sequences on one axis and takes it."""
    q, k, v = make(66000, 1, 1, 4, 4, 32, mx.float16, seed=8)
    ok, reason = fa.can_use_fused(q, k, v, scale=0.2, stream=device)
    assert ok and (reason.startswith("short-sequence") or not on_gpu(device)), reason
    assert_close(run(q, k, v, 0.2, "causal", device), q, k, v, 0.2, "causal", what="B=66000")


@device_params()
def test_transposed_inputs(device):
    """[B, L, H, D] transposed views, read through their strides."""
    base = rand((4, 20, 6, 32), mx.float16, 5)
    q = k = v = base.transpose(0, 2, 1, 3)
    assert_close(run(q, k, v, 0.3, "causal", device), q, k, v, 0.3, "causal", what="transposed")


@device_params()
def test_fully_masked_rows_match_mx_fast(device):
    """Bool row masked everywhere: the mean of V (0 beside a sink); additive
    row of all -inf: NaN."""
    q, k, v = make(3, 2, 2, 16, 40, 64, mx.float32, seed=9)
    bool_mask = np.array(mx.random.uniform(shape=(3, 2, 16, 40), key=mx.random.key(1)) > 0.5)
    bool_mask[1, 0, 4, :] = False
    out = np.array(run(q, k, v, 0.125, mx.array(bool_mask), device))
    np.testing.assert_allclose(out[1, 0, 4], np.array(v)[1, 0].mean(axis=0), atol=1e-5)
    s = rand((2,), mx.float32, 3)
    out = np.array(run(q, k, v, 0.125, mx.array(bool_mask), device, sinks=s))
    assert np.abs(out[1, 0, 4]).max() < 1e-6
    add = np.zeros((3, 2, 16, 40), np.float32)
    add[2, 1, 7, :] = -np.inf
    out = np.array(run(q, k, v, 0.125, mx.array(add), device))
    assert np.isnan(out[2, 1, 7]).all()
    assert not np.isnan(np.delete(out[2, 1], 7, axis=0)).any()


@device_params()
@pytest.mark.parametrize("switch", [None, "0"])
def test_choice_is_reported(device, switch, monkeypatch):
    """can_use_fused names the short kernel where a GPU runs it (L_q, L_k <=
    64 and a head dim it has, unless MLX_FUSED_ATTN_SHORT_ATTENTION=0); the general
    kernel, which also takes the head dims the short one lacks (80, 256, q
    and k 192 with v 128), and the CPU say nothing."""
    if switch is not None:
        monkeypatch.setenv("MLX_FUSED_ATTN_SHORT_ATTENTION", switch)
    short = make(2, 4, 4, 48, 64, 64, mx.float16, seed=1)
    long_k = make(2, 4, 4, 48, 65, 64, mx.float16, seed=1)
    d80 = make(2, 4, 4, 48, 64, 80, mx.float16, seed=1)
    d256 = make(2, 4, 4, 48, 64, 256, mx.bfloat16, seed=1)
    latent = make(2, 4, 4, 48, 64, 192, mx.float16, seed=1, Dv=128)
    for (q, k, v), expect_short in [
        (short, on_gpu(device) and switch is None),
        (long_k, False),
        (d80, False),
        (d256, False),
        (latent, False),
    ]:
        ok, reason = fa.can_use_fused(q, k, v, scale=0.1, stream=device)
        assert ok
        if expect_short:
            assert reason.startswith("short-sequence kernel: L_q and L_k <= 64"), reason
        else:
            assert reason == ""
        out = fa.scaled_dot_product_attention(q, k, v, scale=0.1, force_fused=True, stream=device)
        assert_close(out, q, k, v, 0.1, what=reason or "general")


def cuda_gpu():
    return mx.gpu in DEVICES and hasattr(mx, "cuda") and mx.cuda.is_available()


@pytest.mark.skipif(not cuda_gpu(), reason="no CUDA GPU in MLX")
@pytest.mark.parametrize("dtype", [mx.float16, mx.float32])
def test_cuda_jit_matches_aot(dtype, tmp_path, monkeypatch):
    """NVRTC and nvcc build the same short kernel."""
    q, k, v = make(7, 5, 5, 40, 33, 32, dtype, seed=11)
    m = make_mask("additive", (7, 5, 40, 33), dtype, seed=2)

    def once():
        out = fa.scaled_dot_product_attention(q, k, v, scale=0.2, mask=m, force_fused=True, stream=mx.gpu)
        return np.array(out.astype(mx.float32))

    monkeypatch.delenv("MLX_FUSED_ATTN_JIT", raising=False)
    aot = once()
    monkeypatch.setenv("MLX_FUSED_ATTN_JIT", "1")
    monkeypatch.setenv("MLX_FUSED_ATTN_CACHE_DIR", str(tmp_path))
    np.testing.assert_array_equal(once(), aot)
    assert_close(mx.array(aot).astype(dtype), q, k, v, 0.2, m, what="aot")
