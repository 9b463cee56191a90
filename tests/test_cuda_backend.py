"""The CUDA backend on an NVIDIA GPU: the fused path is taken, JIT (NVRTC)
and AOT (nvcc) kernels give identical outputs, and the JIT's disk cache is
written. The rest of the suite covers the kernel's results on the GPU (its
tests run on every device MLX has)."""

import os

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import assert_close, rand


def cuda_gpu():
    return mx.is_available(mx.gpu) and hasattr(mx, "cuda") and mx.cuda.is_available()


pytestmark = pytest.mark.skipif(not cuda_gpu(), reason="no CUDA GPU in MLX")

# (dtype, D, L_q, L_k, mask kind, sinks): one per kernel variant and dtype.
CASES = [
    (mx.float16, 64, 200, 300, "causal", False),
    (mx.bfloat16, 128, 129, 257, "bool", True),
    (mx.float32, 80, 65, 100, "additive", False),
    (mx.float16, 32, 1, 1000, None, True),
]


def make_case(dtype, D, Lq, Lk, mask, sinks, seed):
    q = rand((2, 4, Lq, D), dtype, seed)
    k = rand((2, 2, Lk, D), dtype, seed + 1)
    v = rand((2, 2, Lk, D), dtype, seed + 2)
    key = mx.random.key(seed + 3)
    if mask == "bool":
        mask = mx.random.uniform(shape=(2, 4, Lq, Lk), key=key) > 0.5
    elif mask == "additive":
        mask = mx.random.normal((1, 4, Lq, Lk), key=key).astype(dtype)
    s = rand((4,), dtype, seed + 4) if sinks else None
    return q, k, v, mask, s


def test_fused_path_is_taken_on_the_gpu():
    # Past 64 keys: the general kernel (shorter calls name the short one).
    q, k, v, _, _ = make_case(mx.float16, 64, 64, 65, None, False, 1)
    ok, reason = fa.can_use_fused(q, k, v, scale=0.1, stream=mx.gpu)
    assert ok and reason == ""
    q256 = rand((1, 2, 16, 256), mx.float16, 2)
    ok, reason = fa.can_use_fused(q256, q256, q256, scale=0.1, stream=mx.gpu)
    assert not ok and "head dim 256" in reason


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-d{c[1]}-{c[4]}")
def test_jit_matches_aot(case, tmp_path, monkeypatch):
    dtype, D, Lq, Lk, mask, sinks = case
    q, k, v, m, s = make_case(dtype, D, Lq, Lk, mask, sinks, seed=D + Lq)

    def run():
        out = fa.scaled_dot_product_attention(
            q, k, v, scale=D**-0.5, mask=m, sinks=s, force_fused=True, stream=mx.gpu
        )
        return np.array(out.astype(mx.float32))

    monkeypatch.delenv("MLX_FUSED_ATTN_JIT", raising=False)
    aot = run()
    monkeypatch.setenv("MLX_FUSED_ATTN_JIT", "1")
    monkeypatch.setenv("MLX_FUSED_ATTN_CACHE_DIR", str(tmp_path))
    jit = run()
    np.testing.assert_array_equal(jit, aot)
    assert_close(mx.array(jit).astype(dtype), q, k, v, D**-0.5, m, s, what="jit")


def test_jit_cache_is_written(tmp_path, monkeypatch):
    # A kernel this process has not loaded yet: fp32 at head dim 96, causal.
    monkeypatch.setenv("MLX_FUSED_ATTN_JIT", "1")
    monkeypatch.setenv("MLX_FUSED_ATTN_CACHE_DIR", str(tmp_path))
    q, k, v, _, _ = make_case(mx.float32, 96, 40, 40, None, False, 5)
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.1, mask="causal", stream=mx.gpu)
    mx.eval(out)
    files = os.listdir(tmp_path)
    assert any(f.endswith(".cubin") for f in files), files
    assert_close(out, q, k, v, 0.1, "causal", what="jit cached")


def test_large_and_misaligned_inputs():
    # Rows 2 elements off 16-byte alignment take the copy path; a long
    # sequence crosses many key blocks and query blocks.
    base = rand((1, 4, 1500, 72), mx.bfloat16, 7)
    q, k, v = base[..., 2:66], base[..., 4:68], base[..., 6:70]
    out = fa.scaled_dot_product_attention(q, k, v, scale=0.125, mask="causal", stream=mx.gpu)
    assert_close(out, q, k, v, 0.125, "causal", what="misaligned")
