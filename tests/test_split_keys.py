"""Split keys on the GPU (kernels/split_keys.h): grids under a wave with long
keys, decode (L_q = 1, GQA packed) and chunked prefill, against the float64
reference (conftest.assert_close) and against the same call unsplit
(MLX_FUSED_ATTN_SPLIT_KEYS=0, read when each call is planned)."""

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import DEVICES, assert_close, rand, to_np

pytestmark = pytest.mark.skipif(mx.gpu not in DEVICES, reason="no GPU to test")

# (dtype, B, H_q, H_kv, L_q, L_k, D, mask, sinks): decode with and without
# GQA (packed without sinks), ragged key counts, every mask kind, chunked
# prefill under a causal mask whose first query blocks leave splits empty.
CASES = [
    (mx.bfloat16, 1, 32, 8, 1, 32768, 128, None, False),
    (mx.float16, 1, 32, 8, 1, 4097, 128, "causal", False),
    (mx.float16, 2, 8, 8, 1, 5000, 64, "bool", False),
    (mx.bfloat16, 1, 16, 4, 1, 3001, 128, "additive", True),
    (mx.float32, 1, 8, 2, 1, 2500, 64, None, False),
    (mx.bfloat16, 1, 32, 8, 128, 8192, 128, "causal", False),
    (mx.float16, 1, 4, 4, 77, 3000, 96, "causal", True),
    (mx.float16, 3, 6, 2, 1, 1999, 80, "bool", True),
]
IDS = [f"{str(c[0]).split('.')[-1]}-B{c[1]}-H{c[2]}/{c[3]}-Lq{c[4]}-Lk{c[5]}-D{c[6]}-{c[7]}-sinks{c[8]}" for c in CASES]


def make(dtype, B, Hq, Hk, Lq, Lk, D, mask, sinks, seed):
    q = rand((B, Hq, Lq, D), dtype, seed)
    k = rand((B, Hk, Lk, D), dtype, seed + 1)
    v = rand((B, Hk, Lk, D), dtype, seed + 2)
    key = mx.random.key(seed + 3)
    if mask == "bool":
        mask = mx.random.uniform(shape=(B, Hq, Lq, Lk), key=key) > 0.3
    elif mask == "additive":
        mask = mx.random.normal((1, Hq, Lq, Lk), key=key).astype(dtype)
    s = rand((Hq,), dtype, seed + 4) if sinks else None
    return q, k, v, mask, s


def run(q, k, v, mask, sinks):
    out = fa.scaled_dot_product_attention(
        q, k, v, scale=q.shape[-1] ** -0.5, mask=mask, sinks=sinks, force_fused=True, stream=mx.gpu
    )
    mx.eval(out)
    return out


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_split_matches_the_reference_and_the_unsplit_kernel(case, monkeypatch):
    q, k, v, mask, sinks = make(*case, seed=sum(case[1:7]))
    split = run(q, k, v, mask, sinks)
    assert_close(split, q, k, v, q.shape[-1] ** -0.5, mask, sinks, what=str(case))
    monkeypatch.setenv("MLX_FUSED_ATTN_SPLIT_KEYS", "0")
    unsplit = run(q, k, v, mask, sinks)
    # Both round once from fp32; the splits only regroup the sums.
    np.testing.assert_allclose(to_np(split), to_np(unsplit), atol=2e-2, rtol=2e-2)


def test_fully_masked_decode_rows_are_the_mean_of_v():
    q, k, v, _, _ = make(mx.float16, 1, 8, 2, 1, 4000, 64, None, False, seed=5)
    mask = mx.zeros((1, 8, 1, 4000), dtype=mx.bool_)
    out = run(q, k, v, mask, None)
    assert_close(out, q, k, v, 0.125, mask, what="all masked")


def test_keys_masked_in_whole_splits_add_nothing():
    q, k, v, _, _ = make(mx.bfloat16, 1, 8, 8, 1, 8192, 128, None, False, seed=6)
    visible = mx.arange(8192) % 4096 < 100
    mask = mx.broadcast_to(visible, (1, 8, 1, 8192))
    out = run(q, k, v, mask, None)
    assert_close(out, q, k, v, 128**-0.5, mask, what="whole splits masked")


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("dtype,Hq,Hkv,D", [(mx.bfloat16, 32, 8, 128), (mx.float16, 8, 2, 64)])
def test_decode_with_a_padding_mask_shared_by_heads(kind, dtype, Hq, Hkv, D):
    """mlx-lm's batched decoding: a mask [B, 1, 1, L_k] hiding each entry's
    left padding, which GQA-packed decoding reads by block. Paddings end
    inside blocks; a bool entry hides every key (the mean of V), an
    additive one carries a third value (read element by element)."""
    B, L_k = 4, 3001
    q, k, v, _, _ = make(dtype, B, Hq, Hkv, 1, L_k, D, None, False, seed=7)
    pad = mx.array([0, 5, 700, L_k if kind == "bool" else 1500])
    keep = mx.arange(L_k)[None, None, None] >= pad[:, None, None, None]
    if kind == "bool":
        mask = keep
    else:
        bias = mx.where(mx.arange(L_k) % 97 == 3, -2.0, 0.0)
        mask = mx.where(keep, bias * (mx.arange(B) == 2)[:, None, None, None], -mx.inf).astype(dtype)
    out = run(q, k, v, mask, None)
    assert_close(out, q, k, v, D**-0.5, mask, what=f"{kind} padding")


def test_decode_skips_the_padding_of_a_mask_shared_by_heads():
    """Packed decoding reads a mask of one head by block: the key blocks of
    an entry's left padding are skipped, their K and V never read (NaN
    there changes nothing; read and weighted 0, it would make NaN)."""
    B, Hq, Hkv, L_k, D = 2, 16, 4, 4096, 128
    q, k, v, _, _ = make(mx.bfloat16, B, Hq, Hkv, 1, L_k, D, None, False, seed=9)
    keep = mx.arange(L_k) >= mx.array([0, 512])[:, None, None, None]
    padding = (mx.arange(B) == 1)[:, None, None, None] & (mx.arange(L_k) < 512)[None, None, :, None]
    out = run(q, mx.where(padding, mx.nan, k), mx.where(padding, mx.nan, v), keep, None)
    assert_close(out, q, k, v, D**-0.5, keep, what="padding skipped")


def cuda_gpu():
    return hasattr(mx, "cuda") and mx.cuda.is_available()


# (dtype, B, H_q, H_kv, L_q, L_k, D, mask, sinks): decode B=1 (16 splits on
# an H100) and chunked prefill (4): the two sides of the combine's rule.
FORM_CASES = [
    (mx.bfloat16, 1, 32, 8, 1, 4096, 128, None, False),
    (mx.bfloat16, 1, 32, 8, 128, 4096, 128, "causal", False),
]


@pytest.mark.parametrize("case", FORM_CASES, ids=[f"Lq{c[4]}" for c in FORM_CASES])
def test_every_combine_form_gives_the_same_output(case, monkeypatch):
    """The combine of split keys in each form (plan/split_count.h,
    MLX_FUSED_ATTN_SPLIT_COMBINE forcing it on CUDA; Metal has the
    one-element form only): the planner's by its split count and rows, each
    form against the reference and the one-element form (the same sums,
    the row form's in another order: at most the dtype's rounding apart)."""
    # A combine kernel merges: not the last split (an opt-in a GPU run may set).
    monkeypatch.setenv("MLX_FUSED_ATTN_SPLIT_MERGE", "0")
    q, k, v, mask, sinks = make(*case, seed=11)
    scale = q.shape[-1] ** -0.5
    plan = fa.plan_summary(q, k, v, scale=scale, mask=mask, stream=mx.gpu)
    assert plan.key_splits > 1 and not plan.split_merge, plan
    if cuda_gpu():
        # Decode's 32 rows of 128 fill 16 blocks of 256 elements: a row a
        # threadgroup; chunked prefill's 4 splits: one element a thread.
        assert plan.combine_form == ("row" if plan.key_splits >= 8 else "one_element"), plan
    else:
        assert plan.combine_form == "one_element", plan
    outs = {}
    for form in ("one_element", "grouped", "row"):
        monkeypatch.setenv("MLX_FUSED_ATTN_SPLIT_COMBINE", form)
        forced = fa.plan_summary(q, k, v, scale=scale, mask=mask, stream=mx.gpu)
        assert forced.combine_form == (form if cuda_gpu() else "one_element"), forced
        assert forced.key_splits == plan.key_splits, forced
        outs[form] = run(q, k, v, mask, sinks)
        assert_close(outs[form], q, k, v, scale, mask, sinks, what=f"{form} {case}")
    for form in ("grouped", "row"):
        np.testing.assert_allclose(
            to_np(outs["one_element"]), to_np(outs[form]), rtol=2.0**-7, atol=1e-6
        )
