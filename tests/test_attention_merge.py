"""attention_merge (the C++ op behind ring attention's forward): a block's
attention merged by LSE into the output and LSE held so far, rounded to the
output's dtype once a merge; on the CPU in place, in the held arrays'
buffers. Against float64 references and against the float32-accumulator
form (merge_attention of every partial)."""

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import FLOOR, device_params, rand, reference, to_np

CUTS = [0, 30, 31, 70, 97]


def blocks(mask, Lq, Lk):
    """The whole mask and each block's part of it (bool columns)."""
    if mask == "causal":
        full = mx.arange(Lk)[None, :] <= mx.arange(Lq)[:, None] + Lk - Lq
    elif mask == "bool":
        full = mx.random.uniform(shape=(Lq, Lk), key=mx.random.key(4)) > 0.5
        full[3, :] = False  # a row that sees no key at all
        full[5, :31] = False  # a row that sees none of the first blocks
    else:
        return None, [None] * (len(CUTS) - 1)
    return full, [full[:, a:b] for a, b in zip(CUTS, CUTS[1:])]


@device_params()
@pytest.mark.parametrize("mask", [None, "causal", "bool"])
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_merged_blocks_are_the_whole_attention(dtype, mask, device):
    Lq, Lk = 40, CUTS[-1]
    q, k, v = rand((1, 4, Lq, 64), dtype, 1), rand((1, 2, Lk, 64), dtype, 2), rand((1, 2, Lk, 64), dtype, 3)
    scale = 64**-0.5
    full, parts = blocks(mask, Lq, Lk)
    outs, lses, held = [], [], None
    for (a, b), m in zip(zip(CUTS, CUTS[1:]), parts):
        kb, vb = k[:, :, a:b], v[:, :, a:b]
        o, lse = fa.scaled_dot_product_attention(q, kb, vb, scale=scale, mask=m, return_lse=True, stream=device)
        outs.append(o)
        lses.append(lse)
        if held is None:
            held = (o, lse)
        else:
            held = fa._ext.attention_merge(q, kb, vb, *held, scale=scale, mask=m, stream=device)
    out, lse = held
    assert out.dtype == dtype and lse.dtype == mx.float32
    fp32_form, fp32_lse = fa.merge_attention(outs, lses)
    whole_lse = np.array(fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=full, return_lse=True)[1])
    seen = np.isfinite(whole_lse)
    np.testing.assert_array_equal(np.isneginf(np.array(lse)), ~seen)
    np.testing.assert_allclose(np.array(lse)[seen], np.array(fp32_lse)[seen], rtol=1e-5, atol=1e-5)
    ref = reference(q, k, v, scale, full)
    err = np.abs(to_np(out) - ref).max(axis=-1)[seen].max()
    # One rounding a merge against merge_attention's one in all: within
    # twice its error plus the dtype's floor.
    bound = 2 * np.abs(to_np(fp32_form) - ref).max(axis=-1)[seen].max() + FLOOR[dtype]
    assert err <= bound, f"{err:.3g} > {bound:.3g}"


def test_a_held_output_read_elsewhere_is_left_as_it_was():
    q, k, v = rand((1, 2, 64, 32), mx.float16, 5), rand((1, 2, 64, 32), mx.float16, 6), rand((1, 2, 64, 32), mx.float16, 7)
    out, lse = fa.scaled_dot_product_attention(q, k[:, :, :32], v[:, :, :32], scale=0.2, return_lse=True, stream=mx.cpu)
    mx.eval(out, lse)
    before, before_lse = np.array(out), np.array(lse)
    merged = fa._ext.attention_merge(q, k[:, :, 32:], v[:, :, 32:], out, lse, scale=0.2, stream=mx.cpu)
    mx.eval(merged)
    np.testing.assert_array_equal(np.array(out), before)
    np.testing.assert_array_equal(np.array(lse), before_lse)
    whole = fa.scaled_dot_product_attention(q, k, v, scale=0.2, stream=mx.cpu)
    np.testing.assert_allclose(to_np(merged[0]), to_np(whole), atol=2e-3)


def test_the_cpu_merges_in_the_held_buffers():
    """No output buffer is allocated when the held arrays are the loop's
    own (each merge's input and nothing else's)."""
    q = rand((1, 2, 4096, 64), mx.float16, 8)
    k, v = rand((1, 2, 256, 64), mx.float16, 9), rand((1, 2, 256, 64), mx.float16, 10)
    held = fa.scaled_dot_product_attention(q, k[:, :, :64], v[:, :, :64], scale=0.125, return_lse=True, stream=mx.cpu)
    mx.eval(held)
    mx.synchronize()
    mx.reset_peak_memory()
    active = mx.get_active_memory()
    for a in range(64, 256, 64):
        held = fa._ext.attention_merge(q, k[:, :, a : a + 64], v[:, :, a : a + 64], *held, scale=0.125, stream=mx.cpu)
        mx.eval(held)
    grown = mx.get_peak_memory() - active
    assert grown < held[0].nbytes // 4, f"the merges allocated {grown} bytes (output: {held[0].nbytes})"


def test_merge_rejects_a_held_output_of_another_shape():
    q = mx.zeros((1, 2, 8, 16))
    with pytest.raises(ValueError, match="held_out must have the output's shape"):
        fa._ext.attention_merge(q, q, q, mx.zeros((1, 2, 8, 8)), mx.zeros((1, 2, 8)), scale=1.0)
    with pytest.raises(ValueError, match="held_lse must have shape"):
        fa._ext.attention_merge(q, q, q, q, mx.zeros((1, 2)), scale=1.0)


@pytest.mark.parametrize("stream", ["default", "new"])
def test_calls_no_cpu_kernel_covers_merge_with_plain_ops(stream):
    """float64 has no CPU kernel: the fused call with its LSE and the
    plain-op merge (what a GPU stream runs; compiled on the default
    stream) give the whole attention, to float32 (the LSE's and the
    merge's precision)."""
    stream = mx.cpu if stream == "default" else mx.new_stream(mx.cpu)
    q, k, v = (rand(s, mx.float64, i) for i, s in enumerate([(1, 2, 24, 16), (1, 1, 50, 16), (1, 1, 50, 16)]))
    held = (mx.zeros((1, 2, 24, 16), dtype=mx.float64), mx.full((1, 2, 24), -mx.inf))
    for a, b in ((0, 20), (20, 50)):
        held = fa._ext.attention_merge(q, k[:, :, a:b], v[:, :, a:b], *held, scale=0.25, stream=stream)
    assert held[0].dtype == mx.float64
    np.testing.assert_allclose(to_np(held[0]), reference(q, k, v, 0.25), rtol=1e-5, atol=1e-6)
