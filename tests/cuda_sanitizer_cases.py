"""A small run of every CUDA kernel variant, for compute-sanitizer (memcheck
finds out-of-bounds and misaligned accesses, racecheck shared-memory races):

    compute-sanitizer --tool memcheck python tests/cuda_sanitizer_cases.py
    compute-sanitizer --tool racecheck python tests/cuda_sanitizer_cases.py

Covers each dtype, each kernel variant (unmasked, causal, bool and additive
masks, a sliding-window mask whose key blocks are skipped, mixed blocks read
as bits or element by element), sinks, GQA, ragged query and key blocks, a
misaligned (copied) input, grids past one wave (the large-grid tiles, and
on Hopper at D = 128 the producer warpgroup's TMA copies, on static and
persistent grids; the small-grid producer tiles, one math warpgroup), grids
under one with split keys (decode with GQA packed, chunked prefill, array
masks whose visits the splits share, a padding mask that packed decoding
reads by block; merged by the last split, and by the combine kernel in
each of its forms), head dims padded to whole
fragments (72), past 128 and with v's head dim differing (192 with 128), and
a poisoned output; each result is checked against mx.fast on the CPU. The
gradient cases run the fused backward (row dot, dK/dV, dQ; or the
one-kernel form, dK/dV adding dQ through atomics and the conversion,
in some) after a forward that saves the LSE (split keys merged by the last
split, which writes it, or unsplit), over the mask's block lists where it
has them, against mx.fast's gradients on the CPU. Outputs moved to device
memory after a host read, and left unified. Issue 46's opt-in paths
(plan/kernel_switches.h) each run with their switch "1" and "0". Attention
over a quantized K/V cache in each kernel its plan picks
(plan/quantized_kernel_choice.h: the default and the decode tiles, the
packed chunk policies' 16-byte loads and row-major stores, the float chunks
forced and for words that are not 16-byte aligned), against mx.fast over
the dequantized cache.
Not collected by pytest: under the sanitizers a run takes minutes.
"""

import os

os.environ.setdefault("MLX_FUSED_ATTN_POISON", "1")

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

import mlx_fused_attn as fa  # noqa: E402

TOL = {mx.float16: 2e-2, mx.bfloat16: 6e-2, mx.float32: 1e-4}


def case(dtype, D, Lq, Lk, mask_kind, sinks, seed, misaligned=False, batch=1, Dv=None):
    key = mx.random.key(seed)
    kq, kk, kv, km, ks = mx.random.split(key, 5)
    width = D + 2 if misaligned else D
    q = mx.random.normal((batch, 4, Lq, width), key=kq).astype(dtype)[..., width - D :]
    k = mx.random.normal((batch, 2, Lk, D), key=kk).astype(dtype)
    v = mx.random.normal((batch, 2, Lk, Dv or D), key=kv).astype(dtype)
    mask = {
        None: None,
        "causal": "causal",
        "bool": mx.random.uniform(shape=(Lq, Lk), key=km) > 0.3,
        "additive": mx.random.normal((1, 4, Lq, Lk), key=km).astype(dtype),
        # mlx-lm's sliding-window mask: hidden, shown and mixed key blocks.
        "window": (mx.arange(Lq)[:, None] + Lk - Lq >= mx.arange(Lk))
        & (mx.arange(Lq)[:, None] + Lk - Lq < mx.arange(Lk) + 150),
        # mlx-lm's batched decoding: each entry's left padding hidden, for
        # every head (packed GQA reads its classes by block).
        "padding": mx.arange(Lk) >= (mx.arange(batch) * 413 + 5)[:, None, None, None],
        # The benchmark's mask: 0 or one finite off value, a diagonal shown.
        "two_valued": mx.where(
            (mx.random.uniform(shape=(1, 4, Lq, Lk), key=km) > 0.25)
            | (mx.arange(Lq)[:, None] == mx.arange(Lk)),
            0.0,
            -1e4,
        ).astype(dtype),
    }[mask_kind]
    s = mx.random.normal((4,), key=ks).astype(dtype) if sinks else None
    out = fa.scaled_dot_product_attention(
        q, k, v, scale=D**-0.5, mask=mask, sinks=s, force_fused=True, stream=mx.gpu
    )
    want = mx.fast.scaled_dot_product_attention(
        q, k, v, scale=D**-0.5, mask=mask, sinks=s, stream=mx.cpu
    )
    err = np.abs(np.array(out.astype(mx.float32)) - np.array(want.astype(mx.float32))).max()
    status = "ok" if err <= TOL[dtype] else "FAIL"
    print(f"{status} {dtype} D={D} Dv={Dv or D} Lq={Lq} Lk={Lk} mask={mask_kind} sinks={sinks} "
          f"misaligned={misaligned} max err {err:.2e}", flush=True)
    return status == "ok"


def quant_case(dtype, D, Lq, Lk, bits, mask_kind, seed, batch=1, odd_words=False):
    """quantized_scaled_dot_product_attention (8 query heads on 2) against
    mx.fast on the CPU over the cache dequantized; `odd_words`: the codes'
    rows 17 words apart (a padding column cut off), not 16-byte aligned."""
    key = mx.random.key(seed)
    kq, kk, kv, km = mx.random.split(key, 4)
    group = 64 if D % 64 == 0 else 32
    q = mx.random.normal((batch, 8, Lq, D), key=kq).astype(dtype)
    qk = mx.quantize(mx.random.normal((batch, 2, Lk, D), key=kk).astype(dtype), group_size=group, bits=bits)
    qv = mx.quantize(mx.random.normal((batch, 2, Lk, D), key=kv).astype(dtype), group_size=group, bits=bits)
    k = mx.dequantize(*qk, group_size=group, bits=bits, dtype=mx.float32).astype(dtype)
    v = mx.dequantize(*qv, group_size=group, bits=bits, dtype=mx.float32).astype(dtype)
    if odd_words:
        qk, qv = (
            (mx.concatenate([w, mx.zeros(w.shape[:-1] + (1,), w.dtype)], axis=-1)[..., : w.shape[-1]], s, b)
            for w, s, b in (qk, qv)
        )
    mask = {None: None, "causal": "causal", "bool": mx.random.uniform(shape=(Lq, Lk), key=km) > 0.3}[mask_kind]
    out = fa.quantized_scaled_dot_product_attention(
        q, qk, qv, D**-0.5, mask, group, bits, force_fused=True, stream=mx.gpu
    )
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=D**-0.5, mask=mask, stream=mx.cpu)
    err = np.abs(np.array(out.astype(mx.float32)) - np.array(want.astype(mx.float32))).max()
    status = "ok" if err <= TOL[dtype] else "FAIL"
    print(f"{status} quantized {dtype} D={D} Lq={Lq} Lk={Lk} bits={bits} mask={mask_kind} "
          f"batch={batch} odd_words={odd_words} max err {err:.2e}", flush=True)
    return status == "ok"


def grad_case(dtype, D, Lq, Lk, mask_kind, sinks, seed, form=None):
    """`form`: MLX_FUSED_ATTN_BWD_ONE_KERNEL while the backward is planned
    ("1" one kernel, "0" two; None unset, the default: two)."""
    key = mx.random.key(seed)
    kq, kk, kv, km, ks, kd = mx.random.split(key, 6)
    q = mx.random.normal((2, 4, Lq, D), key=kq).astype(dtype)
    k = mx.random.normal((2, 2, Lk, D), key=kk).astype(dtype)
    v = mx.random.normal((2, 2, Lk, D), key=kv).astype(dtype)
    dout = mx.random.normal((2, 4, Lq, D), key=kd).astype(dtype)
    mask = {
        None: None,
        "causal": "causal",
        "bool": mx.random.uniform(shape=(Lq, Lk), key=km) > 0.3,
        "additive": mx.random.normal((1, 4, Lq, Lk), key=km).astype(dtype),
        # A sliding window every head shares, each entry's rows past its
        # padding (batch entry 1 pads 40 rows, which see no key): the
        # backward's block lists, hidden, shown and cut blocks.
        "window": (mx.arange(Lq)[:, None] + Lk - Lq >= mx.arange(Lk))
        & (mx.arange(Lq)[:, None] + Lk - Lq < mx.arange(Lk) + 70)
        & (mx.arange(Lq)[:, None] >= mx.array([0, 40])[:, None, None, None]),
    }[mask_kind]
    s = mx.random.normal((4,), key=ks).astype(dtype) if sinks else None

    def grads(attention, stream, **kw):
        f = lambda q, k, v: attention(q, k, v, scale=D**-0.5, mask=mask, sinks=s, stream=stream, **kw)  # noqa: E731
        return mx.vjp(f, [q, k, v], [dout])[1]

    if form is not None:
        os.environ["MLX_FUSED_ATTN_BWD_ONE_KERNEL"] = form
    got = grads(fa.scaled_dot_product_attention, mx.gpu, force_fused=True)
    mx.eval(got)
    os.environ.pop("MLX_FUSED_ATTN_BWD_ONE_KERNEL", None)
    want = grads(mx.fast.scaled_dot_product_attention, mx.cpu)
    ok = True
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        w = np.array(w.astype(mx.float32))
        err = np.abs(np.array(g.astype(mx.float32)) - w).max() / max(np.abs(w).max(), 1e-6)
        status = "ok" if err <= 2 * TOL[dtype] else "FAIL"
        ok = ok and status == "ok"
        print(f"{status} grad {name} {dtype} D={D} Lq={Lq} Lk={Lk} mask={mask_kind} sinks={sinks} form={form} "
              f"relative err {err:.2e}", flush=True)
    return ok


def switched(variable, value, run, *args, **kwargs):
    """`run`'s case with the switch `variable` set to `value` (read when
    each call is planned or, for MLX_FUSED_ATTN_DEVICE_OUTPUTS, run)."""
    os.environ[variable] = value
    try:
        return run(*args, **kwargs)
    finally:
        del os.environ[variable]


def merged_in_kernel(value, run, *args, **kwargs):
    """Split keys merged by the last split ("1") or the combine kernel."""
    return switched("MLX_FUSED_ATTN_SPLIT_MERGE", value, run, *args, **kwargs)


def combine_form(value, run, *args, **kwargs):
    """Split keys merged by the combine kernel in form `value`
    (MLX_FUSED_ATTN_SPLIT_COMBINE)."""
    return switched("MLX_FUSED_ATTN_SPLIT_COMBINE", value, run, *args, **kwargs)


def forced_grid(value, run, *args, **kwargs):
    """The producer kernel's persistent grid ("1") or the static one."""
    return switched("MLX_FUSED_ATTN_PERSISTENT", value, run, *args, **kwargs)


def small_grid_tiles(value, run, *args, **kwargs):
    """Hopper's small-grid producer tiles on small grids ("1") or the
    chooser's tiles."""
    return switched("MLX_FUSED_ATTN_SMALL_GRID_PRODUCER", value, run, *args, **kwargs)


def block_lists(value, run, *args, **kwargs):
    """An array mask's classes by block and the backward's block lists
    ("1", the default) or every block read element by element ("0")."""
    return switched("MLX_FUSED_ATTN_MASK_BLOCKS", value, run, *args, **kwargs)


def device_outputs(value, run, *args, **kwargs):
    """Outputs that MLX's cache hands in unified memory (the previous
    same-sized case's, read by the host and freed) moved to device memory
    ("1", the default) or left there ("0")."""
    return switched("MLX_FUSED_ATTN_DEVICE_OUTPUTS", value, run, *args, **kwargs)


def decode_tiles(value, run, *args, **kwargs):
    """The quantized family's decode tiles ("1") or key-slice tiles
    ("slices") wherever they have kernels, or its default tiles ("0")."""
    return switched("MLX_FUSED_ATTN_QUANT_DECODE_TILES", value, run, *args, **kwargs)


def float_chunks(run, *args, **kwargs):
    """The quantized loader's float chunks in place of the packed ones."""
    return switched("MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS", "1", run, *args, **kwargs)


def main():
    results = [
        # Quantized K/V: decode with GQA packed and split keys on the
        # default and key-slice tiles (packed chunks, rows fastest) and the
        # decode tiles (packed 16-byte loads), each also with the float
        # chunks; ragged blocks (a ragged key slice, slices past the last
        # key), a bool mask; prefill past one query block (D = 96: the
        # 16-byte loads alone); 8 bits (float chunks); words whose rows are
        # not 16-byte aligned (read by the float chunks).
        decode_tiles("0", quant_case, mx.bfloat16, 128, 1, 3001, 4, None, 51, batch=2),
        decode_tiles("1", quant_case, mx.bfloat16, 128, 1, 3001, 4, None, 51, batch=2),
        float_chunks(decode_tiles, "0", quant_case, mx.bfloat16, 128, 1, 3001, 4, None, 51, batch=2),
        float_chunks(decode_tiles, "1", quant_case, mx.bfloat16, 128, 1, 3001, 4, None, 51, batch=2),
        decode_tiles("slices", quant_case, mx.bfloat16, 128, 1, 3001, 4, None, 51, batch=2),
        float_chunks(decode_tiles, "slices", quant_case, mx.bfloat16, 128, 1, 3001, 4, None, 51,
                     batch=2),
        decode_tiles("1", quant_case, mx.float16, 64, 1, 2000, 4, "bool", 52, batch=3),
        decode_tiles("slices", quant_case, mx.float16, 64, 1, 2000, 4, "bool", 52, batch=3),
        decode_tiles("slices", quant_case, mx.bfloat16, 128, 4, 700, 4, "causal", 57),
        quant_case(mx.float16, 96, 70, 130, 4, "causal", 53),
        quant_case(mx.bfloat16, 256, 33, 100, 4, "bool", 54),
        quant_case(mx.bfloat16, 128, 5, 333, 8, "causal", 55),
        decode_tiles("1", quant_case, mx.bfloat16, 128, 1, 3001, 4, None, 56, odd_words=True),
        decode_tiles("0", quant_case, mx.float16, 128, 1, 3001, 4, None, 56, odd_words=True),
        decode_tiles("slices", quant_case, mx.float16, 128, 1, 3001, 4, None, 56, odd_words=True),
        case(mx.float16, 64, 130, 200, None, False, 1),
        case(mx.float16, 128, 70, 130, "causal", True, 2),
        case(mx.bfloat16, 80, 129, 65, "bool", False, 3),
        case(mx.bfloat16, 96, 33, 100, "additive", True, 4),
        case(mx.float32, 32, 65, 77, "causal", False, 5),
        case(mx.float32, 128, 20, 40, None, True, 6),
        case(mx.float16, 64, 100, 100, None, False, 7, misaligned=True),
        # Past one wave of query blocks: the large-grid tiles (Q in shared
        # memory on Hopper), with a ragged last query block.
        case(mx.float16, 128, 1000, 200, "causal", True, 8, batch=7),
        case(mx.bfloat16, 96, 1000, 150, "bool", False, 9, batch=5),
        # Zero-filled columns 72..79 of Q, K and V; the store of 72 columns.
        case(mx.float16, 72, 129, 100, "causal", True, 10),
        case(mx.float32, 72, 33, 70, "bool", False, 11),
        # Past D = 128: Q in shared memory on Hopper at 256; v narrower.
        case(mx.bfloat16, 256, 130, 90, "additive", True, 12),
        case(mx.float16, 192, 70, 129, "causal", False, 13, Dv=128),
        case(mx.float32, 256, 40, 33, None, True, 14),
        # Under a wave with long keys: split keys, merged by the last split
        # (kernels/cuda/split_merge.cuh) or the combine kernel; decode
        # without sinks packs the 2 query heads of each KV head as rows.
        merged_in_kernel("1", case, mx.bfloat16, 128, 1, 4000, None, False, 15),
        merged_in_kernel("0", case, mx.bfloat16, 128, 1, 4000, None, False, 15),
        merged_in_kernel("1", case, mx.float16, 64, 1, 3001, "additive", True, 16),
        merged_in_kernel("0", case, mx.float16, 64, 1, 3001, "additive", True, 16),
        merged_in_kernel("1", case, mx.float16, 128, 100, 3000, "causal", True, 17),
        merged_in_kernel("0", case, mx.float16, 128, 100, 3000, "causal", True, 17),
        merged_in_kernel("1", case, mx.float32, 64, 1, 2000, "bool", False, 18, batch=3),
        merged_in_kernel("0", case, mx.float32, 64, 1, 2000, "bool", False, 18, batch=3),
        # The combine's three forms, whatever the rule picks: a row a
        # threadgroup over many rows, each form at decode.
        combine_form("row", case, mx.float16, 128, 100, 3000, "causal", True, 17),
        combine_form("row", case, mx.bfloat16, 128, 1, 4000, None, False, 15),
        combine_form("grouped", case, mx.bfloat16, 128, 1, 4000, None, False, 15),
        combine_form("one_element", case, mx.bfloat16, 128, 1, 4000, None, False, 15),
        # The fused backward: GQA, ragged blocks, L_q != L_k.
        grad_case(mx.float16, 64, 130, 200, None, False, 19),
        grad_case(mx.bfloat16, 128, 200, 130, "causal", True, 20),
        grad_case(mx.float16, 96, 129, 77, "bool", False, 21),
        grad_case(mx.float32, 32, 100, 150, "additive", True, 22),
        # Forwards that split their keys (under a wave, long keys) where the
        # last split merges and writes the LSE, else unsplit; decode packs
        # the GQA group as rows.
        merged_in_kernel("1", grad_case, mx.float16, 128, 100, 3000, "causal", True, 23),
        merged_in_kernel("0", grad_case, mx.float16, 128, 100, 3000, "causal", True, 23),
        merged_in_kernel("1", grad_case, mx.bfloat16, 64, 1, 2000, None, False, 24),
        merged_in_kernel("0", grad_case, mx.bfloat16, 64, 1, 2000, None, False, 24),
        # The mask's block lists: blocks skipped in both kernels.
        grad_case(mx.float16, 64, 300, 333, "window", False, 37),
        grad_case(mx.bfloat16, 128, 257, 200, "window", True, 38),
        # A bool mask's mixed blocks, whole and ragged: read as the lists'
        # shown bits, or byte by byte with the lists off.
        grad_case(mx.float16, 64, 256, 300, "bool", False, 49),
        block_lists("0", grad_case, mx.float16, 64, 256, 300, "bool", False, 49),
        grad_case(mx.bfloat16, 128, 256, 200, "bool", False, 50, form="1"),
        # The one-kernel backward (the two-kernel form of the same cases
        # above, unset, and here with "0"): on Hopper's warpgroup products
        # (16-bit), and on mma.sync (fp32; at D = 96 its warps share a
        # block's dQ by columns, some with one product fewer).
        grad_case(mx.float16, 64, 130, 200, None, False, 19, form="0"),
        grad_case(mx.bfloat16, 128, 200, 130, "causal", True, 20, form="0"),
        grad_case(mx.float16, 64, 130, 200, None, False, 39, form="1"),
        grad_case(mx.bfloat16, 128, 200, 130, "causal", True, 40, form="1"),
        grad_case(mx.float32, 32, 100, 150, "additive", True, 41, form="1"),
        grad_case(mx.float32, 96, 129, 77, "bool", False, 42, form="1"),
        grad_case(mx.float16, 128, 257, 200, "window", False, 43, form="1"),
        # Key blocks skipped and read without the mask (the visit list),
        # ragged, past one wave.
        case(mx.float16, 64, 700, 900, "window", False, 25, batch=3),
        case(mx.bfloat16, 128, 1000, 1000, "window", True, 26, batch=5),
        # Two-valued blocks read as bits (a finite off value), split keys
        # over a visit list, and a ragged key block inside a bits word.
        case(mx.float16, 64, 300, 1000, "two_valued", False, 27),
        case(mx.float16, 64, 64, 3001, "window", True, 28),
        case(mx.float32, 128, 100, 2999, "two_valued", True, 29),
        # fp16 additive values in the product's accumulator: a ragged query
        # block (rows past L_q read the last row) and a ragged key block.
        case(mx.float16, 64, 200, 700, "additive", False, 30),
        case(mx.float16, 128, 333, 257, "additive", True, 31, batch=2),
        # Past one wave at D = 128 on Hopper: a producer warpgroup copies K
        # and V by TMA (tile/kv_tma_ring.h), ragged blocks. (Cases 8 and 26
        # run it too.)
        case(mx.bfloat16, 128, 1000, 333, None, True, 32, batch=5),
        case(mx.float16, 128, 500, 700, "causal", False, 33, batch=9),
        # Chunked prefill: one ragged causal query block a head.
        case(mx.bfloat16, 128, 100, 700, "causal", False, 34, batch=40),
        # The producer's grids above are a few waves, static: the persistent
        # grid (plan/persistent_grid.h) is opt-in. Those two persistent and
        # static forced; and persistent blocks walking many tiles of two key
        # blocks or one (the ring's stages and phases carried across tiles),
        # and the same static.
        forced_grid("1", case, mx.bfloat16, 128, 1000, 333, None, True, 32, batch=5),
        forced_grid("0", case, mx.bfloat16, 128, 1000, 333, None, True, 32, batch=5),
        forced_grid("1", case, mx.float16, 128, 500, 700, "causal", False, 33, batch=9),
        forced_grid("0", case, mx.float16, 128, 500, 700, "causal", False, 33, batch=9),
        forced_grid("1", case, mx.bfloat16, 128, 200, 200, "causal", False, 39, batch=40),
        forced_grid("0", case, mx.bfloat16, 128, 200, 200, "causal", False, 39, batch=40),
        forced_grid("1", case, mx.float16, 128, 250, 130, "bool", True, 40, batch=30),
        forced_grid("0", case, mx.float16, 128, 250, 130, "bool", True, 40, batch=30),
        # The small-grid producer tiles (opt-in; at least 128 queries, up to
        # 1024 keys, or under two waves: plan/small_grid.h), 64 queries a
        # block, D = 128 and 64, ragged blocks, masks and sinks, split keys
        # far under a wave; and their persistent grid, blocks walking many
        # tiles of one or two key blocks.
        small_grid_tiles("1", case, mx.float16, 128, 500, 700, "causal", False, 33, batch=9),
        small_grid_tiles("1", case, mx.bfloat16, 128, 300, 333, "bool", True, 45, batch=2),
        small_grid_tiles("1", case, mx.float16, 64, 200, 700, "additive", True, 46, batch=3),
        small_grid_tiles("1", case, mx.bfloat16, 128, 130, 3000, "causal", False, 48),
        forced_grid("1", small_grid_tiles, "1", case, mx.bfloat16, 128, 200, 200, "causal",
                    False, 39, batch=40),
        forced_grid("1", small_grid_tiles, "1", case, mx.float16, 64, 250, 130, None, True, 47,
                    batch=30),
        # Decode with GQA packed under a padding mask that every head shares:
        # skipped, shown and two-valued key blocks, split keys.
        case(mx.bfloat16, 128, 1, 3001, "padding", False, 35, batch=3),
        case(mx.float16, 64, 1, 2000, "padding", False, 36, batch=2),
        # Same-sized outputs in a row, each after the last one's host read
        # (float32: the check reads the output itself, not a cast copy):
        # moved to device memory, then left unified.
        device_outputs("1", case, mx.float32, 64, 130, 200, None, False, 44),
        device_outputs("1", case, mx.float32, 64, 130, 200, None, False, 44),
        device_outputs("0", case, mx.float32, 64, 130, 200, None, False, 44),
        device_outputs("0", case, mx.float32, 64, 130, 200, None, False, 44),
    ]
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    raise SystemExit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
