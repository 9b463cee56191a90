"""The fused backward (FusedAttentionVJP): gradients of q, k, v, sinks and an
additive mask against float64 references for every mask kind, GQA, sinks,
ragged blocks, L_q != L_k, strided inputs and every dtype; that the fused
path runs and builds no L_q x L_k array; its transforms; and a LoRA step of
a tiny mlx-lm model. On a GPU whose build has no backward kernel yet the
same calls run the plain-ops vjp, and the value checks hold alike."""

import io
import json
import os
import subprocess
import sys
import textwrap

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import DTYPES, FLOOR, device_params, rand, to_np

SCALE = 0.3
# A masked score in the float64 reference: all masked scores alike, so a row
# masked everywhere averages v, as finfo(dtype).min does in mx.fast.
LOWEST = -1e30


def attention64(q, k, v, mask, sinks):
    """softmax(SCALE q k^T + mask) v in float64 with MLX ops on the CPU."""
    g = q.shape[1] // k.shape[1]
    k, v = mx.repeat(k, g, axis=1), mx.repeat(v, g, axis=1)
    s = SCALE * (q @ k.swapaxes(-1, -2))
    L_q, L_k = q.shape[2], k.shape[2]
    if isinstance(mask, str):
        allowed = mx.arange(L_q)[:, None] + (L_k - L_q) >= mx.arange(L_k)[None, :]
        s = mx.where(allowed, s, LOWEST)
    elif mask is not None and mask.dtype == mx.bool_:
        s = mx.where(mask, s, LOWEST)
    elif mask is not None:
        s = s + mask
    if sinks is not None:
        sk = mx.broadcast_to(sinks[None, :, None, None], (*s.shape[:3], 1))
        s = mx.concatenate([sk, s], axis=-1)
    p = mx.softmax(s, axis=-1, precise=True)
    if sinks is not None:
        p = p[..., 1:]
    return p @ v


def fused(q, k, v, mask, sinks):
    return fa.scaled_dot_product_attention(q, k, v, scale=SCALE, mask=mask, sinks=sinks)


def naive(q, k, v, mask, sinks):
    return mx.fast.scaled_dot_product_attention(q, k, v, scale=SCALE, mask=mask, sinks=sinks)


def f64(x):
    """x as a float64 (or bool) array on the CPU; strings and None as they are."""
    if x is None or isinstance(x, str):
        return x
    return mx.array(np.array(x) if x.dtype == mx.bool_ else to_np(x))


def gradients(attn, q, k, v, mask, sinks, w, mask_grad):
    """d/d(q, k, v[, mask][, sinks]) of sum(attn(...) * w)."""
    diff = ([mask] if mask_grad else []) + ([sinks] if sinks is not None else [])

    def loss(q, k, v, *rest):
        rest = list(rest)
        m = rest.pop(0) if mask_grad else mask
        s = rest.pop(0) if sinks is not None else None
        return (attn(q, k, v, m, s) * w).sum()

    return mx.grad(loss, argnums=list(range(3 + len(diff))))(q, k, v, *diff)


def check_gradients(device, q, k, v, mask=None, sinks=None, mask_grad=False, what=""):
    """The FlashAttention rule on each gradient: the fused error is at most
    twice that of the same gradient taken naively in the input dtype
    (mx.fast, unfused on the CPU), plus the dtype's floor."""
    dt = q.dtype
    w = rand((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), dt, 99)
    with mx.stream(device):
        got = gradients(fused, q, k, v, mask, sinks, w, mask_grad)
    # The naive gradient on the CPU: mx.fast's CUDA backward gives a row
    # masked everywhere NaN gradients in 16 bits, which would void the bound.
    with mx.stream(mx.cpu):
        low = gradients(naive, q, k, v, mask, sinks, w, mask_grad)
        ref = gradients(
            attention64, *map(f64, (q, k, v, mask, sinks, w)), mask_grad=mask_grad
        )
    names = ["dq", "dk", "dv"] + (["dmask"] if mask_grad else []) + (["dsinks"] if sinks is not None else [])
    for name, g, n, r in zip(names, got, low, ref):
        r = np.array(r)
        assert g.shape == r.shape, f"{what} {name}: shape {g.shape} != {r.shape}"
        err = np.abs(to_np(g) - r).max(initial=0.0)
        naive_err = np.abs(to_np(n) - r).max(initial=0.0)
        bound = 2 * naive_err + FLOOR[dt] * max(1.0, np.abs(r).max(initial=0.0))
        assert err <= bound, f"{what} {name}: error {err:.3g} > bound {bound:.3g} (naive {naive_err:.3g})"


# name: (B, H_q, H_kv, L_q, L_k, D, D_v, mask, sinks)
CASES = {
    "plain": (2, 2, 2, 64, 64, 32, 32, None, False),
    "ragged": (1, 2, 2, 65, 100, 64, 64, None, False),
    "causal": (2, 4, 2, 100, 100, 64, 64, "causal", False),
    "causal-short-queries": (1, 2, 1, 33, 130, 32, 32, "causal", False),
    # Rows 0..59 see no key (bottom-right alignment): they average v.
    "causal-long-queries": (1, 2, 2, 130, 70, 32, 32, "causal", False),
    # Broadcast over heads, with a row masked everywhere.
    "bool": (2, 4, 1, 65, 65, 64, 64, "bool", False),
    # Some -inf entries (never a whole row).
    "additive": (1, 4, 2, 33, 65, 64, 64, "additive", False),
    "sinks-causal": (1, 4, 2, 70, 70, 64, 64, "causal", True),
    "sinks-bool": (1, 2, 2, 33, 65, 32, 32, "bool", True),
    "gqa-8": (1, 8, 1, 65, 65, 64, 64, None, False),
    "head-dims-differ": (1, 2, 2, 40, 72, 64, 32, "causal", False),
    # Under a GPU wave with long keys, where the forward splits its keys:
    # on CUDA the last split merges them and writes the LSE, on Metal the
    # forward saves it unsplit. Decode packs the GQA group as rows.
    "long-keys": (1, 2, 1, 40, 1500, 64, 64, "causal", True),
    "decode-gqa": (1, 4, 1, 1, 700, 64, 64, None, False),
}


def make_case(name, dtype, seed=0):
    B, H_q, H_kv, L_q, L_k, D, D_v, mask, sinks = CASES[name]
    q = rand((B, H_q, L_q, D), dtype, seed + 1)
    k = rand((B, H_kv, L_k, D), dtype, seed + 2)
    v = rand((B, H_kv, L_k, D_v), dtype, seed + 3)
    key = mx.random.key(seed + 4)
    if mask == "bool":
        mask = mx.random.uniform(shape=(B, 1, L_q, L_k), key=key) > 0.3
        mask[:, :, 3, :] = False
    elif mask == "additive":
        noise = mx.random.normal((L_q, L_k), key=key)
        mask = mx.where(mx.random.uniform(shape=(L_q, L_k), key=key) > 0.9, -mx.inf, noise).astype(dtype)
    s = rand((H_q,), dtype, seed + 5) if sinks else None
    return q, k, v, mask, s


@device_params()
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", list(CASES))
def test_gradients(device, name, dtype):
    q, k, v, mask, sinks = make_case(name, DTYPES[dtype])
    check_gradients(device, q, k, v, mask, sinks, what=f"{name} {dtype}")


@device_params()
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_gradients_of_strided_inputs(device, dtype):
    """q and v read through a [B, L, H, D] layout, k through a strided head
    dim, and a transposed cotangent."""
    dt = DTYPES[dtype]
    q = rand((2, 70, 4, 64), dt, 1).transpose(0, 2, 1, 3)
    k = rand((2, 2, 70, 128), dt, 2)[..., ::2]
    v = rand((2, 70, 2, 64), dt, 3).transpose(0, 2, 1, 3)
    check_gradients(device, q, k, v, "causal", what=f"strided {dtype}")


@device_params()
def test_additive_mask_gradient(device):
    """An additive mask that is differentiated: its gradient, the L_q x L_k
    score gradient, comes from the plain-ops vjp; q, k, v's stay fused."""
    q, k, v, _, _ = make_case("ragged", mx.float32)
    mask = rand((1, 1, 65, 100), mx.float32, 7)
    check_gradients(device, q, k, v, mask, mask_grad=True, what="mask grad")


def graph(out):
    """out's unevaluated graph in DOT: one node a primitive, by name."""
    dot = io.StringIO()
    mx.export_to_dot(dot, *out)
    return dot.getvalue()


@pytest.mark.parametrize("name", ["causal", "bool", "additive", "sinks-causal", "gqa-8"])
def test_cpu_runs_the_fused_backward(name):
    """On the CPU every fused forward's gradients come from FusedAttentionVJP,
    with no softmax or matmul of the scores in the graph."""
    q, k, v, mask, sinks = make_case(name, mx.float32)
    with mx.stream(mx.cpu):
        g = mx.grad(lambda q, k, v: fused(q, k, v, mask, sinks).sum(), argnums=(0, 1, 2))(q, k, v)
    dot = graph(g)
    assert "FusedAttentionVJP" in dot
    assert "Softmax" not in dot and "Matmul" not in dot


@device_params()
@pytest.mark.parametrize("heads", [1, 2], ids=["mask_shared_by_heads", "mask_per_head"])
def test_backward_skips_keys_a_bool_mask_hides_from_every_row(device, heads):
    """Pairs of blocks that a bool mask hides whole add nothing: NaN in those
    keys' K and V changes no gradient (a product with them would make dQ
    NaN). A key-padding mask [B, heads, 1, L_k] hiding an entry's first 128
    keys, which the CPU kernel skips by block and the GPU kernels through the
    mask's block lists."""
    B, H, L, D = 2, 2, 256, 32
    q, k, v = (rand((B, H, L, D), mx.float32, i) for i in range(3))
    w = rand((B, H, L, D), mx.float32, 9)
    mask = mx.arange(L) >= mx.array([0, 128])[:, None, None, None]
    mask = mx.broadcast_to(mask, (B, heads, 1, L))
    padding = (mx.arange(B) == 1)[:, None, None, None] & (mx.arange(L) < 128)[None, None, :, None]
    k_nan, v_nan = (mx.where(padding, mx.nan, x) for x in (k, v))
    with mx.stream(device):
        got = gradients(fused, q, k_nan, v_nan, mask, None, w, False)
        want = gradients(fused, q, k, v, mask, None, w, False)
    for name, g, r in zip(["dq", "dk", "dv"], got, want):
        np.testing.assert_allclose(to_np(g), to_np(r), rtol=1e-6, atol=1e-7, err_msg=name)


@device_params()
@pytest.mark.parametrize("mask_kind", ["bool", "additive"])
def test_gradients_under_masks_with_hidden_shown_and_cut_blocks(device, mask_kind):
    """A causal sliding window, as mlx-lm builds it for training: blocks the
    mask hides whole, blocks it shows whole and blocks the window's edges
    cut; GQA groups sharing the mask. The bool mask also pads each entry on
    the left (batched training), so that padded query rows see no key and
    average V (their blocks are read whole); an additive mask hides with
    -inf and keeps every row seeing its own key."""
    B, Hq, Hkv, L, D = 2, 4, 2, 300, 64
    q = rand((B, Hq, L, D), mx.float16, 0)
    k, v = (rand((B, Hkv, L, D), mx.float16, i) for i in (1, 2))
    i, j = mx.arange(L)[:, None], mx.arange(L)[None]
    window = ((j <= i) & (j > i - 100))[None, None]
    if mask_kind == "bool":
        pad = mx.array([0, 70])[:, None, None, None]
        mask = window & (i >= pad) & (j >= pad)
    else:
        mask = mx.where(window, mx.array(0.0, mx.float16), mx.array(-mx.inf, mx.float16))
    check_gradients(device, q, k, v, mask, what=f"window {mask_kind}")


@device_params()
@pytest.mark.parametrize("mask_kind", ["bool", "additive"])
@pytest.mark.parametrize("lists", ["1", "0"], ids=["lists", "every_block"])
def test_gradients_under_a_random_mask_over_whole_blocks(device, mask_kind, lists, monkeypatch):
    """A random mask over whole blocks of every backend's tiles, as a
    benchmark's: every block mixes shown and hidden scores, so that the GPU
    backward reads a bool mask's shown bits (with the block lists) or its
    bytes (MLX_FUSED_ATTN_MASK_BLOCKS=0), an additive mask's values; a row
    the bool mask hides everywhere averages V."""
    monkeypatch.setenv("MLX_FUSED_ATTN_MASK_BLOCKS", lists)
    H, L, D = 2, 256, 64
    q, k, v = (rand((1, H, L, D), mx.float16, i) for i in range(3))
    if mask_kind == "bool":
        mask = mx.random.uniform(shape=(1, 1, L, L), key=mx.random.key(5)) > 0.25
        mask[:, :, 7, :] = False
    else:
        mask = rand((1, 1, L, L), mx.float16, 5)
    check_gradients(device, q, k, v, mask, what=f"random {mask_kind}, lists {lists}")


BROKEN_BACKWARD = textwrap.dedent(
    r"""
    import io, json, warnings
    import mlx.core as mx
    import mlx_fused_attn as fa

    mx.set_default_device(mx.cpu)
    q, k, v = (mx.random.normal((1, 2, 70, 32), key=mx.random.key(i)) for i in range(3))

    def loss(attn):
        return lambda q: (attn(q, k, v, scale=0.3, mask="causal") ** 2).sum()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = mx.grad(loss(fa.scaled_dot_product_attention))(q)
        fa.scaled_dot_product_attention(q, k, v, scale=0.3)  # drains the notices
    want = mx.grad(loss(mx.fast.scaled_dot_product_attention))(q)
    dot = io.StringIO()
    mx.export_to_dot(dot, got)
    print(json.dumps({
        "forward": fa.can_use_fused(q, k, v, scale=0.3, mask="causal"),
        "err": float(mx.abs(got - want).max()),
        "fused_backward": "FusedAttentionVJP" in dot.getvalue(),
        "warnings": [str(w.message) for w in caught],
    }))
    """
)


def test_backward_that_cannot_run_falls_back_with_its_reason():
    """A backward kernel family that cannot run (the test hook) leaves the
    forward fused, takes gradients through plain ops, and says why under
    MLX_FUSED_ATTN_WARN_FALLBACK=1. In a child process: outcomes are kept
    for the process."""
    env = dict(os.environ, MLX_FUSED_ATTN_BREAK_FAMILY="attention_backward", MLX_FUSED_ATTN_WARN_FALLBACK="1")
    r = subprocess.run([sys.executable, "-c", BROKEN_BACKWARD], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["forward"][0], result
    assert not result["fused_backward"] and result["err"] < 1e-4, result
    notes = [w for w in result["warnings"] if "the backward of scaled_dot_product_attention" in w]
    assert len(notes) == 1 and "attention_backward" in notes[0], result["warnings"]


def peak_backward_memory(attn, q, k, v):
    mx.eval(q, k, v)
    mx.reset_peak_memory()
    g = mx.grad(lambda q, k, v: (attn(q, k, v, "causal", None) ** 2).sum(), argnums=(0, 1, 2))(q, k, v)
    mx.eval(g)
    return mx.get_peak_memory()


def test_cpu_backward_memory_is_linear_in_length():
    """No L x L array on the fused path: the whole forward and backward at
    L = 2048 peak under a quarter of one fp32 score matrix, which the plain
    path does build (so the measure sees it)."""
    B, H, L, D = 1, 4, 2048, 32
    scores = B * H * L * L * 4
    with mx.stream(mx.cpu):
        q, k, v = (rand((B, H, L, D), mx.float32, i) for i in range(3))
        assert peak_backward_memory(fused, q, k, v) < scores / 4
        assert peak_backward_memory(naive, q, k, v) > scores


@device_params()
def test_second_order(device):
    """Gradients of gradients go through FusedAttentionVJP's plain-ops
    definition."""
    q, k, v, _, sinks = make_case("sinks-causal", mx.float32)

    def outer(attn):
        def inner(q, k, v, s):
            return (attn(q, k, v, "causal", s) ** 2).sum()

        return lambda q: (mx.grad(inner, argnums=(1, 3))(q, k, v, sinks)[0] ** 2).sum()

    with mx.stream(device):
        got = mx.grad(outer(fused))(q)
    with mx.stream(mx.cpu):
        want = mx.grad(outer(naive))(q)
    # MLX's CUDA matmuls multiply float32 in TF32, and the second order is
    # plain ops on the device.
    tol = 1e-3 if device == mx.cpu else 5e-3
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=tol, atol=tol)


@device_params()
def test_vmap_and_grad_compose(device):
    q, k, v, _, _ = make_case("causal", mx.float32)
    qs = mx.stack([q, 0.5 * q, -q])

    def loss(attn):
        return lambda q: (attn(q, k, v, "causal", None) ** 2).sum()

    def loss_of_vmap(attn):
        return lambda qs: (mx.vmap(lambda q: attn(q, k, v, "causal", None))(qs) ** 2).sum()

    with mx.stream(device):
        for got, want in [
            (mx.vmap(mx.grad(loss(fused)))(qs), mx.vmap(mx.grad(loss(naive)))(qs)),
            (mx.grad(loss_of_vmap(fused))(qs), mx.grad(loss_of_vmap(naive))(qs)),
        ]:
            np.testing.assert_allclose(np.array(got), np.array(want), rtol=2e-4, atol=2e-4)


@device_params()
def test_vmap_over_sinks_under_grad(device):
    """Sinks that vary along the mapped axis cannot fold into the batch: the
    forward and its hidden LSE go through the plain-ops vmap."""
    q, k, v, _, _ = make_case("causal", mx.float32)
    sinks = rand((3, q.shape[1]), mx.float32, 8)

    def loss(attn):
        return lambda s: (mx.vmap(lambda s: attn(q, k, v, "causal", s))(s) ** 2).sum()

    with mx.stream(device):
        got, want = mx.grad(loss(fused))(sinks), mx.grad(loss(naive))(sinks)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=2e-4, atol=2e-4)


@device_params()
def test_jvp_under_trace(device):
    """jvp traces its inputs, so the forward saves its LSE there too; the
    tangent comes from the plain-ops definition."""
    q, k, v, mask, _ = make_case("bool", mx.float32)
    t = rand(q.shape, mx.float32, 9)
    with mx.stream(device):
        got = mx.jvp(lambda q: fused(q, k, v, mask, None), [q], [t])[1][0]
        want = mx.jvp(lambda q: naive(q, k, v, mask, None), [q], [t])[1][0]
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=2e-4, atol=2e-4)


@device_params()
def test_shapeless_compile_of_gradients(device):
    """A shapeless compile of the gradient runs new shapes with their own
    backward plan."""
    q, k, v, _, _ = make_case("causal", mx.float32)

    def loss(q, k, v):
        return (fused(q, k, v, "causal", None) ** 2).sum()

    step = mx.compile(mx.grad(loss, argnums=(0, 1, 2)), shapeless=True)
    with mx.stream(device):
        step(q, k, v)
        short = [x[:, :, :37] for x in (q, k, v)]
        got = step(*short)
        want = mx.grad(loss, argnums=(0, 1, 2))(*short)
    # As the other GPU comparisons: the two runs may differ in kernels (the
    # H200 gave 9e-5 on fp32 gradients of size 2, 3xTF32 products).
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=2e-4, atol=2e-4)


def test_lora_step_runs_the_fused_backward():
    """A LoRA fine-tuning step of a tiny mlx-lm model (GQA, causal) under
    patch_mx_fast: its gradients match the unpatched model's, and on the CPU
    they come from FusedAttentionVJP."""
    pytest.importorskip("mlx_lm")
    import mlx.nn as nn
    from mlx.utils import tree_flatten
    from test_mlx_lm import assert_close, lora_model, loss_fn, tokens

    model = lora_model("llama-gqa")
    data = tokens(65, seed=6, batch=2)
    x, y = data[:, :-1], data[:, 1:]
    step = nn.value_and_grad(model, loss_fn)
    want_loss, want_grads = step(model, x, y)
    with fa.patch_mx_fast():
        got_loss, got_grads = step(model, x, y)
    got_flat = [g for _, g in tree_flatten(got_grads)]
    if mx.default_device() == mx.cpu:
        assert "FusedAttentionVJP" in graph(got_flat)
    assert_close(got_loss, want_loss, 1e-5)
    for (path, want), got in zip(tree_flatten(want_grads), got_flat):
        assert float(mx.abs(want).max()) > 0, f"{path}: no gradient"
        assert_close(got, want, 1e-4)
