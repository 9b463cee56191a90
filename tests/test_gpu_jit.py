"""JIT and AOT kernels give identical outputs on whichever GPU backend MLX
has: Metal (the embedded source compiled by newLibraryWithSource against the
.metallib) or CUDA (NVRTC against nvcc's objects). MLX_FUSED_ATTN_JIT is read
at every dispatch, so one process can run both."""

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import DEVICES, assert_close, rand

pytestmark = pytest.mark.skipif(mx.gpu not in DEVICES, reason="no GPU to test")

# (dtype, D, D_v, L_q, L_k, mask kind, sinks): one per kernel variant and
# dtype, and per kind of head dim (padded to whole fragments, past 128, v
# narrower than q), past 64 keys so the general kernel runs.
CASES = [
    (mx.float16, 64, 64, 200, 300, "causal", False),
    (mx.bfloat16, 128, 128, 129, 257, "bool", True),
    (mx.float32, 80, 80, 65, 100, "additive", False),
    (mx.float16, 32, 32, 1, 1000, None, True),
    (mx.float32, 72, 72, 65, 100, "bool", False),
    (mx.bfloat16, 256, 256, 70, 130, "causal", True),
    (mx.float16, 192, 128, 65, 100, "additive", False),
    (mx.float32, 256, 256, 40, 70, None, True),
    # Past one wave of 64-query blocks on an H200: on Hopper the producer
    # warpgroup's tiles (TMA, mbarriers, setmaxnreg under NVRTC).
    (mx.bfloat16, 128, 128, 2200, 300, None, False),
]


def make_case(dtype, D, Lq, Lk, mask, sinks, seed, Dv=None):
    q = rand((2, 4, Lq, D), dtype, seed)
    k = rand((2, 2, Lk, D), dtype, seed + 1)
    v = rand((2, 2, Lk, Dv or D), dtype, seed + 2)
    key = mx.random.key(seed + 3)
    if mask == "bool":
        mask = mx.random.uniform(shape=(2, 4, Lq, Lk), key=key) > 0.5
    elif mask == "additive":
        mask = mx.random.normal((1, 4, Lq, Lk), key=key).astype(dtype)
    s = rand((4,), dtype, seed + 4) if sinks else None
    return q, k, v, mask, s


def jit_and_aot(run, tmp_path, monkeypatch):
    """run() with the AOT kernels, then with the JIT's (its own cache)."""
    monkeypatch.delenv("MLX_FUSED_ATTN_JIT", raising=False)
    aot = run()
    monkeypatch.setenv("MLX_FUSED_ATTN_JIT", "1")
    monkeypatch.setenv("MLX_FUSED_ATTN_CACHE_DIR", str(tmp_path))
    return run(), aot


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-d{c[1]}-dv{c[2]}-{c[5]}")
def test_jit_matches_aot(case, tmp_path, monkeypatch):
    dtype, D, Dv, Lq, Lk, mask, sinks = case
    q, k, v, m, s = make_case(dtype, D, Lq, Lk, mask, sinks, seed=D + Lq, Dv=Dv)

    def run():
        out = fa.scaled_dot_product_attention(
            q, k, v, scale=D**-0.5, mask=m, sinks=s, force_fused=True, stream=mx.gpu
        )
        return np.array(out.astype(mx.float32))

    jit, aot = jit_and_aot(run, tmp_path, monkeypatch)
    np.testing.assert_array_equal(jit, aot)
    assert_close(mx.array(jit).astype(dtype), q, k, v, D**-0.5, m, s, what="jit")


def test_jit_gradients_match_aot(tmp_path, monkeypatch):
    """The backward's kernels (their argument struct's layout check is the
    host's: NVRTC 13.0 did not parse it) through NVRTC."""
    q, k, v, m, _ = make_case(mx.bfloat16, 64, 200, 300, "causal", False, seed=7)

    def loss(q, k, v):
        o = fa.scaled_dot_product_attention(q, k, v, scale=0.125, mask=m, force_fused=True,
                                            stream=mx.gpu)  # fmt: skip
        return mx.sum(mx.square(o.astype(mx.float32)))

    def run():
        return [np.array(g.astype(mx.float32)) for g in mx.grad(loss, argnums=(0, 1, 2))(q, k, v)]

    jit, aot = jit_and_aot(run, tmp_path, monkeypatch)
    for j, a in zip(jit, aot):
        np.testing.assert_array_equal(j, a)


@pytest.mark.parametrize("L_q", [1, 40])
def test_jit_quantized_matches_aot(L_q, tmp_path, monkeypatch):
    """The quantized family through NVRTC: decode (split keys) and prefill."""
    q = rand((1, 8, L_q, 128), mx.bfloat16, 11)
    k, v = (rand((1, 2, 700, 128), mx.bfloat16, seed) for seed in (12, 13))
    qk, qv = (tuple(mx.quantize(x, group_size=64, bits=4)) for x in (k, v))
    mask = "causal" if L_q > 1 else None

    def run():
        out = fa.quantized_scaled_dot_product_attention(q, qk, qv, 128**-0.5, mask, 64, 4)
        return np.array(out.astype(mx.float32))

    jit, aot = jit_and_aot(run, tmp_path, monkeypatch)
    np.testing.assert_array_equal(jit, aot)
