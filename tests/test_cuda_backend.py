"""The CUDA backend on an NVIDIA GPU: the fused path is taken and the JIT's
disk cache is written (tests/test_gpu_jit.py checks JIT against AOT). The rest of the suite covers the kernel's results on the GPU (its
tests run on every device MLX has)."""

import os

import mlx.core as mx
import pytest

import mlx_fused_attn as fa
from conftest import assert_close, rand
from test_gpu_jit import make_case


def cuda_gpu():
    return mx.is_available(mx.gpu) and hasattr(mx, "cuda") and mx.cuda.is_available()


pytestmark = pytest.mark.skipif(not cuda_gpu(), reason="no CUDA GPU in MLX")

def test_fused_path_is_taken_on_the_gpu():
    # Past 64 keys: the general kernel (shorter calls name the short one).
    q, k, v, _, _ = make_case(mx.float16, 64, 64, 65, None, False, 1)
    ok, reason = fa.can_use_fused(q, k, v, scale=0.1, stream=mx.gpu)
    assert ok and reason == ""
    q160 = rand((1, 2, 16, 160), mx.float16, 2)
    ok, reason = fa.can_use_fused(q160, q160, q160, scale=0.1, stream=mx.gpu)
    assert not ok and "head dim 160;" in reason and "192 and 256" in reason, reason
    # q and k 192 with v 128 has a kernel, with v 64 none.
    q192, v64 = rand((1, 2, 80, 192), mx.float16, 3), rand((1, 2, 80, 64), mx.float16, 4)
    ok, reason = fa.can_use_fused(q192, q192, q192[..., :128], scale=0.1, stream=mx.gpu)
    assert ok and reason == "", reason
    ok, reason = fa.can_use_fused(q192, q192, v64, scale=0.1, stream=mx.gpu)
    assert not ok and "head dim 192 for q and k with 64 for v" in reason, reason
    # A grid under one wave: its keys are split (fa.plan_summary's code).
    q16, kv = rand((1, 32, 16, 128), mx.bfloat16, 5), rand((1, 8, 4096, 128), mx.bfloat16, 6)
    ok, reason = fa.can_use_fused(q16, kv, kv, scale=0.1, mask="causal", stream=mx.gpu)
    assert ok and reason.startswith("keys split ") and reason.endswith(" ways"), reason
    # A grid under one wave whose keys are too few for their partials to
    # pay (1024 keys for 64-row blocks): one pass, no split.
    q8 = rand((1, 8, 1024, 128), mx.bfloat16, 7)
    ok, reason = fa.can_use_fused(q8, q8, q8, scale=0.1, stream=mx.gpu)
    assert ok and reason == "", reason


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


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16, mx.float32])
@pytest.mark.parametrize(
    "view",
    [
        # A pair of columns a load (params.h, mask_pairs): an even offset.
        "offset 2",
        # One value a load: an odd offset, whose pairs would be misaligned
        # (a misaligned load is an error on CUDA, not a wrong value).
        "offset 1",
        # One value a load: an odd L_k, a row's last pair past its end.
        "odd L_k",
        # Pairs: one row broadcast over the queries (row stride 0).
        "one row",
    ],
)
def test_additive_mask_views(dtype, view):
    # fp16 masks go into the product (add_values), bf16 and fp32 after it
    # (add_value_pairs); each view decides whether pairs are read.
    H, L_q = 4, 70
    L_k = 129 if view == "odd L_k" else 130
    q = rand((1, H, L_q, 64), dtype, 21)
    k = rand((1, H, L_k, 64), dtype, 22)
    v = rand((1, H, L_k, 64), dtype, 23)
    wide = rand((1, H, L_q, L_k + 4), dtype, 24)
    mask = {
        "offset 2": wide[..., 2 : L_k + 2],
        "offset 1": wide[..., 1 : L_k + 1],
        "odd L_k": wide[..., :L_k],
        "one row": rand((1, 1, 1, L_k), dtype, 25),
    }[view]
    out = fa.scaled_dot_product_attention(
        q, k, v, scale=0.125, mask=mask, force_fused=True, stream=mx.gpu
    )
    assert_close(out, q, k, v, 0.125, mask, what=f"additive mask, {view}, {dtype}")


@pytest.mark.parametrize(
    "D, dtype, mask, sinks",
    [
        (128, mx.float16, None, True),
        (128, mx.bfloat16, "causal", False),
        (128, mx.float16, "bool", False),
        (128, mx.bfloat16, "additive", True),
        # fp16 additive values ride in the product's accumulator (unit
        # column stride); a transposed mask is read after the product.
        (128, mx.float16, "additive", False),
        (64, mx.float16, "additive", True),
        (64, mx.float16, "additive_t", False),
        (96, mx.float16, "causal", True),
        (96, mx.bfloat16, None, False),
    ],
)
def test_large_grid_tiles(D, dtype, mask, sinks):
    # 4 query blocks of 64 x 32 heads x 8 = 1024 blocks: past one wave of
    # the default tiles on any GPU of up to 341 multiprocessors, so Hopper
    # runs the large-grid tiles (Q in shared memory, staggered K/V copies);
    # ragged query and key blocks, GQA. Few keys keep the reference cheap.
    B, H_q, H_kv, L_q, L_k = 8, 32, 8, 250, 300
    q = rand((B, H_q, L_q, D), dtype, 11)
    k = rand((B, H_kv, L_k, D), dtype, 12)
    v = rand((B, H_kv, L_k, D), dtype, 13)
    m = {
        None: None,
        "causal": "causal",
        "bool": rand((L_q, L_k), mx.float32, 14) > -0.5,
        "additive": rand((1, H_q, L_q, L_k), dtype, 15),
        "additive_t": rand((1, H_q, L_k, L_q), dtype, 15).swapaxes(-1, -2),
    }[mask]
    s = rand((H_q,), dtype, 16) if sinks else None
    scale = D**-0.5
    out = fa.scaled_dot_product_attention(
        q, k, v, scale=scale, mask=m, sinks=s, force_fused=True, stream=mx.gpu
    )
    assert_close(out, q, k, v, scale, m, s, what=f"large grid D={D} {dtype} {mask}")


def hopper():
    from test_cuda_backward_gpu import gpu_arch

    return gpu_arch() == "90a"


# B, H_q, H_kv, L_q, L_k: past one wave of 64-query blocks on an H200 (132
# multiprocessors, two blocks each), so D = 128 in 16 bits takes the
# producer warpgroup's tiles (kv_tma_ring.h) on Hopper; ragged 128-row
# query and key blocks.
PRODUCER_CASES = {
    "plain": ((2, 32, 8, 300, 333), None, "plain"),
    "causal": ((2, 32, 8, 300, 700), "causal", "plain"),
    # Chunked prefill: one ragged causal query block a head.
    "causal_chunk": ((8, 32, 8, 100, 1000), "causal", "plain"),
    "bool": ((2, 32, 32, 300, 333), "bool", "plain"),
    "additive": ((2, 32, 8, 300, 333), "additive", "plain"),
    "sinks": ((2, 32, 8, 300, 333), None, "sinks"),
    # K and V through a [B, L, H, D] view: the tensor maps take the strides.
    "transposed": ((2, 32, 8, 300, 333), None, "transposed"),
    # K and V broadcast over the batch (stride 0), which a tensor map cannot
    # describe: the host copies them.
    "broadcast": ((2, 32, 8, 300, 333), None, "broadcast"),
}


def producer_inputs(case, dtype, D=128):
    """q, k, v, mask, sinks of a PRODUCER_CASES entry, at head dim D."""
    (B, H_q, H_kv, L_q, L_k), mask, form = case
    q = rand((B, H_q, L_q, D), dtype, 31)
    if form == "transposed":
        k = rand((B, L_k, H_kv, D), dtype, 32).transpose(0, 2, 1, 3)
        v = rand((B, L_k, H_kv, D), dtype, 33).transpose(0, 2, 1, 3)
    elif form == "broadcast":
        k = mx.broadcast_to(rand((1, H_kv, L_k, D), dtype, 32), (B, H_kv, L_k, D))
        v = mx.broadcast_to(rand((1, H_kv, L_k, D), dtype, 33), (B, H_kv, L_k, D))
    else:
        k = rand((B, H_kv, L_k, D), dtype, 32)
        v = rand((B, H_kv, L_k, D), dtype, 33)
    m = {
        None: None,
        "causal": "causal",
        "bool": rand((B, 1, L_q, L_k), mx.float32, 34) > -0.5,
        "additive": rand((1, H_q, L_q, L_k), dtype, 35),
    }[mask]
    s = rand((H_q,), dtype, 36) if form == "sinks" else None
    return q, k, v, m, s


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
@pytest.mark.parametrize("name", list(PRODUCER_CASES))
def test_producer_tiles(name, dtype):
    q, k, v, m, s = producer_inputs(PRODUCER_CASES[name], dtype)
    scale = q.shape[-1] ** -0.5
    out = fa.scaled_dot_product_attention(
        q, k, v, scale=scale, mask=m, sinks=s, force_fused=True, stream=mx.gpu
    )
    assert_close(out, q, k, v, scale, m, s, what=f"producer tiles {name} {dtype}")
    if hopper():
        loaded = [st for st in fa.kernel_status() if "attention_producer_kernel" in st["what"]]
        assert loaded and all(st["reason"] == "" for st in loaded), fa.kernel_status()


# More producer cases for the persistent grid (issue 46): many tiles of
# few key blocks, so that each block walks several tiles and the ring's
# stages and phases run on across tiles of 2 blocks (3 stages); one causal
# tile of 1 block or 2; a grid of 3 tiles a block or more.
PERSISTENT_CASES = {
    **PRODUCER_CASES,
    "short_tiles": ((8, 32, 8, 200, 200), None, "plain"),
    "short_causal": ((8, 32, 8, 200, 200), "causal", "plain"),
    "short_bool": ((8, 32, 32, 200, 200), "bool", "plain"),
    "short_sinks": ((8, 32, 8, 256, 256), None, "sinks"),
}


def plan_tiles(q, k, v, m, s):
    return fa.plan_summary(q, k, v, scale=0.1, mask=m, sinks=s, stream=mx.gpu).tiles


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
@pytest.mark.parametrize("name", list(PERSISTENT_CASES))
def test_persistent_grid_matches_the_static_one(name, dtype, monkeypatch):
    # MLX_FUSED_ATTN_PERSISTENT forces the producer kernel's grid either
    # way: the same tiles' code, so the same bits; against the reference
    # too, since a tile skipped or run twice would only show there if
    # both went wrong alike.
    q, k, v, m, s = producer_inputs(PERSISTENT_CASES[name], dtype)
    scale = q.shape[-1] ** -0.5
    outs = {}
    for forced in ("0", "1"):
        monkeypatch.setenv("MLX_FUSED_ATTN_PERSISTENT", forced)
        if hopper():
            tiles = plan_tiles(q, k, v, m, s)
            assert tiles["producer"] and tiles["persistent"] == (forced == "1"), tiles
        outs[forced] = fa.scaled_dot_product_attention(
            q, k, v, scale=scale, mask=m, sinks=s, force_fused=True, stream=mx.gpu
        )
        mx.eval(outs[forced])
    assert mx.array_equal(outs["0"], outs["1"]).item(), f"persistent {name} {dtype}"
    assert_close(outs["1"], q, k, v, scale, m, s, what=f"persistent {name} {dtype}")


@pytest.mark.parametrize("value", [None, "0", "yes"])
def test_persistent_grid_is_opt_in(value, monkeypatch):
    # The persistent grid stays opt-in (issue 46: 0.71x on a causal grid
    # its rule takes, H200): only "1" takes
    # it, even on issue 46's B=8 L=512 GQA prefill (1024 tiles, under 16
    # waves on any Hopper), where the planner's rule (persistent_grid.h,
    # checked on the host by test_persistent_grid_compile.py) would.
    if not hopper():
        pytest.skip("the producer kernel runs on Hopper only")
    if value is None:
        monkeypatch.delenv("MLX_FUSED_ATTN_PERSISTENT", raising=False)
    else:
        monkeypatch.setenv("MLX_FUSED_ATTN_PERSISTENT", value)
    few = [rand((8, h, 512, 128), mx.bfloat16, i) for i, h in enumerate((32, 8, 8))]
    tiles = plan_tiles(*few, "causal", None)
    assert tiles["producer"] and not tiles["persistent"], tiles
    monkeypatch.setenv("MLX_FUSED_ATTN_PERSISTENT", "1")
    assert plan_tiles(*few, "causal", None)["persistent"]


# Small grids (plan/small_grid.h: keys up to 1024, queries from 128) for
# the small-grid producer tiles (issue 46, opt-in): the producer cases but
# the chunk, whose 100 queries the rule leaves alone, which here has 130
# (a ragged third 64-query block); and a grid far under a wave with long
# keys, whose keys the producer kernel splits.
SMALL_GRID_CASES = {
    **{name: case for name, case in PRODUCER_CASES.items() if name != "causal_chunk"},
    "causal_chunk": ((8, 32, 8, 130, 1000), "causal", "plain"),
    "split_keys": ((1, 4, 2, 130, 3000), "causal", "plain"),
}


def small_grid_tiles(q, k, v, m, s):
    tiles = plan_tiles(q, k, v, m, s)
    return tiles["producer"] and tiles["bq"] == 64 and tiles["min_blocks"] == 2


@pytest.mark.parametrize("D", [128, 64])
@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
@pytest.mark.parametrize("name", list(SMALL_GRID_CASES))
def test_small_grid_producer_tiles(name, dtype, D, monkeypatch):
    # MLX_FUSED_ATTN_SMALL_GRID_PRODUCER forces the small-grid producer
    # tiles (one math warpgroup, no turns) either way, each against the
    # reference: other tiles sum in another order, so not the same bits.
    q, k, v, m, s = producer_inputs(SMALL_GRID_CASES[name], dtype, D)
    scale = D**-0.5
    for forced in ("0", "1"):
        monkeypatch.setenv("MLX_FUSED_ATTN_SMALL_GRID_PRODUCER", forced)
        if hopper():
            assert small_grid_tiles(q, k, v, m, s) == (forced == "1"), plan_tiles(q, k, v, m, s)
        out = fa.scaled_dot_product_attention(
            q, k, v, scale=scale, mask=m, sinks=s, force_fused=True, stream=mx.gpu
        )
        assert_close(out, q, k, v, scale, m, s, what=f"small grid {forced} {name} D={D} {dtype}")


@pytest.mark.parametrize("name", ["plain", "causal", "short_causal", "short_sinks"])
def test_small_grid_producer_tiles_persistent(name, monkeypatch):
    # Both opt-ins: the small-grid tiles' one math warpgroup walking several
    # tiles, the ring's stages and phases run on across them.
    cases = {**SMALL_GRID_CASES, **PERSISTENT_CASES}
    q, k, v, m, s = producer_inputs(cases[name], mx.bfloat16)
    scale = q.shape[-1] ** -0.5
    monkeypatch.setenv("MLX_FUSED_ATTN_SMALL_GRID_PRODUCER", "1")
    monkeypatch.setenv("MLX_FUSED_ATTN_PERSISTENT", "1")
    if hopper():
        tiles = plan_tiles(q, k, v, m, s)
        assert small_grid_tiles(q, k, v, m, s) and tiles["persistent"], tiles
    out = fa.scaled_dot_product_attention(
        q, k, v, scale=scale, mask=m, sinks=s, force_fused=True, stream=mx.gpu
    )
    assert_close(out, q, k, v, scale, m, s, what=f"small grid persistent {name}")


@pytest.mark.parametrize("value", [None, "0", "yes"])
def test_small_grid_producer_is_opt_in(value, monkeypatch):
    # The small-grid tiles stay opt-in (issue 46: 0.86x on one of the
    # grids they take, H200): only "1" takes
    # them, on issue 46's B=8 L=512 GQA prefill, which the large-grid
    # producer tiles (128 queries) run otherwise.
    if not hopper():
        pytest.skip("the producer kernel runs on Hopper only")
    if value is None:
        monkeypatch.delenv("MLX_FUSED_ATTN_SMALL_GRID_PRODUCER", raising=False)
    else:
        monkeypatch.setenv("MLX_FUSED_ATTN_SMALL_GRID_PRODUCER", value)
    few = [rand((8, h, 512, 128), mx.bfloat16, i) for i, h in enumerate((32, 8, 8))]
    tiles = plan_tiles(*few, "causal", None)
    assert tiles["producer"] and tiles["bq"] == 128, tiles
    monkeypatch.setenv("MLX_FUSED_ATTN_SMALL_GRID_PRODUCER", "1")
    assert small_grid_tiles(*few, "causal", None)


def test_producer_tiles_save_the_lse():
    # Training: the forward with a producer warpgroup writes each row's
    # log-sum-exp, which the backward reads.
    from test_backward import check_gradients

    q = rand((1, 32, 600, 128), mx.bfloat16, 41)
    k = rand((1, 8, 600, 128), mx.bfloat16, 42)
    v = rand((1, 8, 600, 128), mx.bfloat16, 43)
    check_gradients(mx.gpu, q, k, v, what="producer tiles, gradients")


def test_plan_summary_and_hints_on_the_gpu():
    """The plan's code and tiles for the short kernel, the general kernel
    and split keys, and the hints that pick another plan of the same call
    (the tuner's candidates), each giving the unhinted result."""
    from mlx_fused_attn.plans import GENERAL_KERNEL, KEYS_SPLIT, SHORT_KERNEL, PlanHint

    short = [rand((2, 4, 32, 64), mx.float16, i) for i in range(3)]
    q16, kv = rand((1, 32, 16, 128), mx.bfloat16, 5), rand((1, 8, 4096, 128), mx.bfloat16, 6)
    cases = [
        (short, None, PlanHint(short_kernel=False), SHORT_KERNEL, GENERAL_KERNEL),
        ((q16, kv, kv), "causal", PlanHint(max_key_splits=1), KEYS_SPLIT, GENERAL_KERNEL),
    ]
    for (q, k, v), mask, hint, code, hinted_code in cases:
        plan = fa.plan_summary(q, k, v, scale=0.1, mask=mask, stream=mx.gpu)
        assert plan.code == code, plan
        hinted = fa.plan_summary(q, k, v, scale=0.1, mask=mask, stream=mx.gpu, hint=hint)
        assert (hinted.code, hinted.family, hinted.key_splits) == (hinted_code, "attention", 1)
        assert {"bq", "bk", "warps"} <= hinted.tiles.keys(), hinted
        got = fa._attention(q, k, v, scale=0.1, mask=mask, stream=mx.gpu, hint=hint)
        assert_close(got, q, k, v, 0.1, mask, what=str(hint))
    assert "seq" in fa.plan_summary(*short, scale=0.1, stream=mx.gpu).tiles
    split = fa.plan_summary(q16, kv, kv, scale=0.1, mask="causal", stream=mx.gpu)
    assert split.key_splits >= 4, split  # 32 query blocks against a wave of 100+
    half = fa.plan_summary(q16, kv, kv, scale=0.1, mask="causal", stream=mx.gpu,
                           hint=PlanHint(max_key_splits=split.key_splits // 2))  # fmt: skip
    assert 1 < half.key_splits <= split.key_splits // 2
