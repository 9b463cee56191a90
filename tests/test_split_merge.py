"""Split keys in one kernel on CUDA (kernels/cuda/split_merge.cuh): the last
split of each query block merges the partials, and the LSE where asked,
against the two-kernel form and the float64 reference, for decode with GQA
at 4096 and 32768 keys, batches 1 and 8, in every dtype. The one-kernel
form is opt-in (kernel_switches.h: decode ran slower with it, issue 46):
each test runs it with MLX_FUSED_ATTN_SPLIT_MERGE=1 and the combine kernel
unset or with 0 (read when each call is planned)."""

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import DEVICES, assert_close, rand, to_np
from test_lse_merge_varlen import lse64



def cuda_gpu():
    return mx.gpu in DEVICES and hasattr(mx, "cuda") and mx.cuda.is_available()


pytestmark = pytest.mark.skipif(not cuda_gpu(), reason="no CUDA GPU in MLX: the one-kernel form is CUDA's")


@pytest.fixture(autouse=True)
def one_kernel(monkeypatch):
    monkeypatch.setenv("MLX_FUSED_ATTN_SPLIT_MERGE", "1")


# (dtype, B, H_q, H_kv, L_k): decode (L_q = 1), GQA packed; the heads
# fewer at batch 8 to keep the float64 reference small.
CASES = [
    (dtype, B, 16 if B == 1 else 8, 4 if B == 1 else 2, L_k)
    for dtype in (mx.float16, mx.bfloat16, mx.float32)
    for B in (1, 8)
    for L_k in (4096, 32768)
]
IDS = [f"{str(c[0]).split('.')[-1]}-B{c[1]}-H{c[2]}/{c[3]}-Lk{c[4]}" for c in CASES]
D = 128
# One unit in the last place of each dtype, relative.
ULP = {mx.float16: 2.0**-10, mx.bfloat16: 2.0**-7, mx.float32: 2.0**-23}


def make(dtype, B, Hq, Hk, Lk, seed):
    q = rand((B, Hq, 1, D), dtype, seed)
    k = rand((B, Hk, Lk, D), dtype, seed + 1)
    v = rand((B, Hk, Lk, D), dtype, seed + 2)
    return q, k, v


def run(q, k, v, return_lse):
    got = fa.scaled_dot_product_attention(
        q, k, v, scale=D**-0.5, force_fused=True, return_lse=return_lse, stream=mx.gpu
    )
    mx.eval(got)
    return got


def plan(q, k, v):
    return fa.plan_summary(q, k, v, scale=D**-0.5, stream=mx.gpu)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_one_kernel_decode_matches_two_kernels_and_the_reference(case, monkeypatch):
    q, k, v = make(*case, seed=case[1] + case[4])
    merged_plan = plan(q, k, v)
    assert merged_plan.key_splits > 1 and merged_plan.split_merge, merged_plan
    merged = run(q, k, v, False)
    assert_close(merged, q, k, v, D**-0.5, what=f"one kernel {case}")

    # Unset, the default: the combine kernel.
    monkeypatch.delenv("MLX_FUSED_ATTN_SPLIT_MERGE")
    combined_plan = plan(q, k, v)
    assert not combined_plan.split_merge, combined_plan
    assert combined_plan.key_splits == merged_plan.key_splits, combined_plan
    combined = run(q, k, v, False)
    # The same partials through the same merge (split_combine_elements),
    # four elements a thread or one: at most the dtype's rounding apart,
    # should the compiler contract the two differently.
    np.testing.assert_allclose(to_np(merged), to_np(combined), rtol=ULP[q.dtype], atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_one_kernel_decode_gives_the_lse(case, monkeypatch):
    q, k, v = make(*case, seed=case[1] + case[4] + 7)
    out, lse = run(q, k, v, True)
    # Split as without the LSE: the same output, bit for bit.
    np.testing.assert_array_equal(to_np(out), to_np(run(q, k, v, False)))
    assert_close(out, q, k, v, D**-0.5, what=f"one kernel with the LSE {case}")
    ref = lse64(q, k, D**-0.5)
    got = np.array(lse).astype(np.float64)
    # float32 arithmetic on inputs rounded to the dtype (as
    # test_lse_merge_varlen's bound), the splits only regrouping the sums.
    tol = 1e-5 if q.dtype == mx.float32 else 1e-2
    assert np.abs(got - ref).max() <= tol * max(1.0, np.abs(ref).max()), case

    # The two-kernel form gives no LSE from split keys: the call runs
    # unsplit (as unset, the default, plans it), to the same LSE up to the
    # sums' order.
    for two_kernels in ("0", None):
        if two_kernels is None:
            monkeypatch.delenv("MLX_FUSED_ATTN_SPLIT_MERGE")
        else:
            monkeypatch.setenv("MLX_FUSED_ATTN_SPLIT_MERGE", two_kernels)
        out2, lse2 = run(q, k, v, True)
        np.testing.assert_allclose(np.array(lse2), np.array(lse), rtol=2e-5, atol=1e-4)
        np.testing.assert_allclose(to_np(out2), to_np(out), atol=2e-2, rtol=2e-2)


def test_one_kernel_decode_under_masks_and_sinks(monkeypatch):
    # A padding mask that hides whole splits (their partials add nothing),
    # a row hidden everywhere (LSE -inf, the mean of v), and sinks (no
    # packing: split 0 counts each head's).
    q, k, v = make(mx.float16, 2, 8, 2, 8192, seed=3)
    visible = (mx.arange(8192) % 4096 < 100)[None, None, None, :]
    mask = mx.broadcast_to(visible, (2, 8, 1, 8192))
    hidden = mx.zeros((1, 8, 1, 8192), dtype=mx.bool_)
    mask = mx.concatenate([mask[:1], hidden], axis=0)
    sinks = rand((8,), mx.float16, 4)
    for m, s in ((mask, None), (None, sinks), (mask, sinks)):
        summary = fa.plan_summary(q, k, v, scale=D**-0.5, mask=m, sinks=s, stream=mx.gpu)
        assert summary.key_splits > 1 and summary.split_merge, summary
        out, lse = fa.scaled_dot_product_attention(
            q, k, v, scale=D**-0.5, mask=m, sinks=s, force_fused=True, return_lse=True,
            stream=mx.gpu)  # fmt: skip
        mx.eval(out, lse)
        assert_close(out, q, k, v, D**-0.5, m, s, what=f"mask {m is not None} sinks {s is not None}")
        ref = lse64(q, k, D**-0.5, m, s)
        got = np.array(lse).astype(np.float64)
        np.testing.assert_array_equal(np.isneginf(got), np.isneginf(ref))
        ok = np.isfinite(ref)
        assert np.abs(got[ok] - ref[ok]).max() <= 1e-2 * max(1.0, np.abs(ref[ok]).max())


@pytest.mark.parametrize("kind", ["none", "bool"])
def test_quantized_decode_in_one_kernel(kind, monkeypatch):
    # The quantized-KV family shares the split path: one query block of
    # packed heads and thousands of keys split under a wave, merged by the
    # last split, the same as by its combine kernel.
    from test_quantized_attention import assert_quantized_close, make_mask, quantized

    rng = np.random.default_rng(5)
    B, Hq, Hk, Lk, bits, group = 1, 8, 2, 9000, 4, 64
    q = mx.array(rng.standard_normal((B, Hq, 1, D), np.float32)).astype(mx.bfloat16)
    k = mx.array(rng.standard_normal((B, Hk, Lk, D), np.float32)).astype(mx.bfloat16)
    v = mx.array(rng.standard_normal((B, Hk, Lk, D), np.float32)).astype(mx.bfloat16)
    qk, qv = quantized(k, group, bits), quantized(v, group, bits)
    mask = make_mask(kind, rng, B, Hq, 2, Lk, mx.bfloat16)
    mask = mask[:, :, 1:] if mask is not None else None  # the row that hides every key

    def run_quantized():
        out = fa.quantized_scaled_dot_product_attention(
            q, qk, qv, D**-0.5, mask, group, bits, stream=mx.gpu)  # fmt: skip
        mx.eval(out)
        return out

    merged = run_quantized()
    assert_quantized_close(merged, q, qk, qv, group, bits, D**-0.5, mask, None, f"one kernel {kind}")
    monkeypatch.setenv("MLX_FUSED_ATTN_SPLIT_MERGE", "0")
    np.testing.assert_allclose(to_np(merged), to_np(run_quantized()), rtol=ULP[mx.bfloat16], atol=1e-6)
