"""mlx_fused_attn/families/attention/attention.metal run in the Metal emulator against a float64 reference.

Every case binds buffers the way mlx_fused_attn/backend/metal/attention_dispatch.cpp
and families/attention/metal/attention_metal.cpp do (q 0, k 1, v 2, out 3,
params 4, mask 5, sinks 6, the mask's classes by block 10; grid (query blocks, H_q, B), threadgroup (32, warps)), poisons
the output with NaN first, and
checks every output element, plus the padding around the output rows, which
must stay untouched (the inputs, reference and check: cases.py).

FA_EMU_SWEEP=full widens the sweep (every dtype x head dim x mask kind).
"""

import ctypes
import itertools
import os
import re
import subprocess

import numpy as np
import pytest

from . import cases, emu, jit_text
from .attn_params import AttnParams
from .cases import INDEPENDENT
from .layouts import Layout

METAL = "mlx_fused_attn/families/attention/attention.metal"
# (head dim of q and k, of v): FA_ATTENTION_HEAD_DIMS (attention_config.h).
HEAD_DIMS = ((32, 32), (64, 64), (72, 72), (80, 80), (96, 96), (128, 128), (192, 128), (192, 192), (256, 256))
# Those added for Gemma (256), DeepSeek's latent attention (192 with v 128)
# and the rest of MLX's list (72, 192), run with every feature.
LARGE_HEAD_DIMS = ((72, 72), (192, 128), (192, 192), (256, 256))
DTYPES = ("float16", "bfloat16", "float32")
FULL = os.environ.get("FA_EMU_SWEEP", "") == "full"

# Feature function constants (mlx_fused_attn/kernels/attention_features.h).
FC = {"has_mask": 300, "bool_mask": 301, "causal": 302, "has_sinks": 303, "align_q": 200, "align_k": 201,
      "mask_blocks": 306}


@pytest.fixture(scope="module")
def prog():
    return emu.load(METAL)


def kernel_for(prog, dtype, head_dim, head_dim_v, suffix="", bk=None):
    """(host name, bq, bk, warps) of the kernel the instantiation list has:
    of key blocks of `bk`, or, with bk None, the default one, whose blocks
    are the smallest (the variants' at D = 128 are 32 keys to its 16)."""
    pat = re.compile(
        rf"fa_attention_{dtype}_d{head_dim}_dv{head_dim_v}_bq(\d+)_bk(\d+)_wm(\d+){re.escape(suffix)}$"
    )
    found = [(n, *map(int, m.groups())) for n in prog.kernels for m in [pat.match(n)] if m]
    if bk is None:
        found = [k for k in found if k[2] == min(f[2] for f in found)]
    else:
        found = [k for k in found if k[2] == bk]
    assert len(found) == 1, f"{dtype} d{head_dim} dv{head_dim_v} bk{bk}: kernels {found}"
    return found[0]


# ---------------------------------------------------------------------------
# One launch


def run_case(prog, *, dtype="float16", D=64, D_v=None, B=1, H_q=2, L_q=33, L_k=65, suffix="", bk=None,
             constants=None, **case):
    """One case of the general kernel (cases.run_case takes the rest of
    `case`). suffix: that of the kernel's name past the tiles ("_qs": Q in
    threadgroup memory, or attention_variants.metal's); bk: its key block
    (kernel_for); constants: function constants besides the features."""
    D_v = D_v or D
    name, bq, bk, warps = kernel_for(prog, dtype, D, D_v, suffix, bk)
    launch = cases.Launch(
        name,
        grid=(-(-L_q // bq), H_q, B),
        warps=warps,
        constants={FC["align_q"]: L_q % bq == 0, FC["align_k"]: L_k % bk == 0, **(constants or {})},
        visit_tiles=(bq, bk),
    )
    return cases.run_case(prog, launch, FC, dtype=dtype, D=D, D_v=D_v, B=B, H_q=H_q, L_q=L_q, L_k=L_k, **case)


def test_params_layout_matches_the_kernel(prog):
    for name, params in prog.kernels.items():
        (p,) = [p for p in params if p.kind == "buffer" and p.index == 4]
        assert p.element_size == ctypes.sizeof(AttnParams), name


# ---------------------------------------------------------------------------
# Every dtype and head dim, ragged both ways


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D,D_v", HEAD_DIMS)
def test_dtypes_and_head_dims(prog, dtype, D, D_v):
    lengths = [(33, 47), (65, 33)] if FULL else [(33, 47)]
    for seed, (L_q, L_k) in enumerate(lengths):
        run_case(prog, dtype=dtype, D=D, D_v=D_v, L_q=L_q, L_k=L_k, H_q=2, seed=seed)


# Each large head dim with every feature, ragged both ways, the dtypes in
# turn: causal with GQA and sinks (L_q > L_k: rows that see no key), and
# each kind of mask with GQA.
LARGE_HEAD_DIM_FEATURES = [
    dict(causal=True, sinks=True, H_q=4, H_kv=2, L_q=41, L_k=35),
    dict(mask="bool", H_q=4, H_kv=2, L_q=33, L_k=50),
    dict(mask="additive", mask_shape=(33, 50), sinks=True, H_q=2, H_kv=1, L_q=33, L_k=50),
]


@pytest.mark.parametrize("features", range(len(LARGE_HEAD_DIM_FEATURES)))
@pytest.mark.parametrize("D,D_v", LARGE_HEAD_DIMS)
def test_large_head_dims_with_features(prog, D, D_v, features):
    dtype = DTYPES[(LARGE_HEAD_DIMS.index((D, D_v)) + features) % len(DTYPES)]
    run_case(prog, dtype=dtype, D=D, D_v=D_v, seed=D + D_v + features, **LARGE_HEAD_DIM_FEATURES[features])


@pytest.mark.parametrize(
    "L_q,L_k",
    [(32, 32), (1, 65), (33, 33), (65, 127), (127, 65), (64, 16)]
    + ([(1000, 33), (17, 1000), (96, 96)] if FULL else []),
)
def test_lengths(prog, L_q, L_k):
    run_case(prog, L_q=L_q, L_k=L_k, seed=L_q * 1000 + L_k)


def test_several_threadgroups_and_batches(prog):
    run_case(prog, dtype="float32", D=32, B=2, H_q=3, L_q=70, L_k=40, seed=7)


@pytest.mark.parametrize("layout", ["blhd", "bhld"])
def test_strided_inputs(prog, layout):
    """[B, L, H, D] transposed views and rows padded inside each head."""
    run_case(prog, dtype="bfloat16", D=64, B=2, H_q=2, L_q=40, L_k=50, layout=layout, seed=3)


@pytest.mark.parametrize("H_q,H_kv", [(4, 2), (3, 1)])
def test_gqa(prog, H_q, H_kv):
    run_case(prog, H_q=H_q, H_kv=H_kv, L_q=40, L_k=33, causal=True, seed=H_q * 10 + H_kv)


@pytest.mark.parametrize("mask", [None, "bool", "additive"])
def test_independent_batch_and_head_strides(prog, mask):
    """B = 2, H_q = 4 over H_kv = 2, every input (and the output and mask)
    stored in its own layout; sinks with the bool mask, causal without one."""
    run_case(prog, dtype="float32", D=32, B=2, H_q=4, H_kv=2, L_q=37, L_k=45, mask=mask,
             causal=mask is None, sinks=mask == "bool", layouts=INDEPENDENT, seed=30)


# ---------------------------------------------------------------------------
# Causal


@pytest.mark.parametrize(
    "L_q,L_k", [(64, 64), (65, 65), (33, 127), (127, 33), (40, 20)] + ([(96, 16), (1, 40)] if FULL else [])
)
def test_causal(prog, L_q, L_k):
    """Bottom-right aligned; with L_q > L_k the first L_q - L_k rows see no
    key and are the mean of V."""
    run_case(prog, L_q=L_q, L_k=L_k, causal=True, seed=L_q + L_k)


def test_causal_fully_masked_rows_are_the_mean_of_v(prog):
    """Rows 0..L_q-L_k-1 see no key: MLX's finfo.min masking gives them a
    uniform softmax over every key, including key blocks past the diagonal
    of the rows that do see keys."""
    fused, _, v = run_case(prog, dtype="float32", D=32, L_q=100, L_k=40, causal=True, seed=5)
    mean_v = np.broadcast_to(v.mean(axis=2, keepdims=True), fused[:, :, :60].shape)
    np.testing.assert_allclose(fused[:, :, :60], mean_v, atol=1e-5)


def test_causal_with_sinks_fully_masked_rows_are_zero(prog):
    fused, _, _ = run_case(prog, dtype="float32", D=64, L_q=50, L_k=20, causal=True, sinks=True, seed=9)
    assert np.abs(fused[:, :, :30, :]).max() < 1e-6


# ---------------------------------------------------------------------------
# Masks


MASK_SHAPES = [
    (1, 2, 33, 65),  # full
    (33, 65),  # broadcast over batch and heads
    (1, 1, 1, 65),  # one row for every query
    (33, 1),  # one column for every key
]


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("shape", MASK_SHAPES)
def test_masks(prog, kind, shape):
    run_case(prog, L_q=33, L_k=65, H_q=2, mask=kind, mask_shape=shape, seed=len(shape))


@pytest.mark.parametrize("dtype", DTYPES if FULL else ["bfloat16"])
def test_bool_mask_every_dtype(prog, dtype):
    run_case(prog, dtype=dtype, D=96, L_q=40, L_k=70, mask="bool", seed=11)


def test_bool_mask_fully_masked_row(prog):
    """All keys masked: uniform over every key (not only within a block)."""

    def edit(x):
        x["mask"][0, 0, 3, :] = False
        x["mask"][0, 1, 30, :] = False

    fused, _, v = run_case(prog, dtype="float32", L_q=33, L_k=65, mask="bool", edit=edit, seed=12)
    np.testing.assert_allclose(fused[0, 0, 3], v[0, 0].mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(fused[0, 1, 30], v[0, 1].mean(axis=0), atol=1e-5)


def test_bool_mask_fully_masked_row_with_sinks_is_zero(prog):
    def edit(x):
        x["mask"][0, 0, 3, :] = False

    fused, _, _ = run_case(prog, dtype="float16", L_q=33, L_k=65, mask="bool", sinks=True, edit=edit, seed=13)
    assert np.abs(fused[0, 0, 3]).max() == 0


def test_additive_mask_of_all_minus_inf_is_nan(prog):
    def edit(x):
        x["mask"][0, 1, 7, :] = -np.inf
        x["mask"][0, 0, 5, :40] = -np.inf  # -inf over whole key blocks, then finite

    fused, _, _ = run_case(prog, dtype="float16", L_q=33, L_k=65, mask="additive", edit=edit, seed=14)
    assert np.isnan(fused[0, 1, 7]).all()
    assert np.isfinite(np.delete(fused[0, 1], 7, axis=0)).all()
    assert np.isfinite(fused[0, 0]).all()


def test_additive_finfo_min_row_is_the_mean_of_v(prog):
    """An fp32 mask of finfo.min (Hugging Face style) masks like a bool mask,
    although finfo.min * log2(e) overflows."""

    def edit(x):
        x["mask"][0, 0, 2, :] = np.finfo(np.float32).min

    fused, _, v = run_case(prog, dtype="float32", L_q=33, L_k=65, mask="additive", edit=edit, seed=15)
    np.testing.assert_allclose(fused[0, 0, 2], v[0, 0].mean(axis=0), atol=1e-5)


# ---------------------------------------------------------------------------
# Array masks by block: the kernel follows the mask's classes by block
# (kernels/mask_visits.h; cases.mask_visits builds them as the host does).

SHOWN, HIDDEN, TWO, VALUES = range(4)


def block_classes(kind, cls, bq, bk, off=-1e4):
    """edit and device_mask_edit for a mask whose (query block, key block)
    of head h is cls(h, qb, kb): shown, hidden, two-valued (shown or `off`,
    at random) or other values (additive: the case's random values; bool
    has none). The kernel reads a mask whose shown blocks mask everything,
    whose hidden blocks show everything and whose two-valued blocks are
    negated (bool) or NaN where shown (additive): read any of those but the
    off value, or visit a hidden block, and it differs from the reference."""
    show, hide = (True, False) if kind == "bool" else (0.0, -np.inf)
    if kind == "bool":
        off = False

    def blocks(m):
        heads = m.reshape((-1,) + m.shape[-2:])  # a view of m's [H, L_q, L_k]
        H, L_q, L_k = heads.shape
        for h, qb, kb in np.ndindex(H, -(-L_q // bq), -(-L_k // bk)):
            yield cls(h, qb, kb), heads[h, qb * bq : (qb + 1) * bq, kb * bk : (kb + 1) * bk]

    def edit(x):
        rng = np.random.default_rng(7)
        for c, block in blocks(x["mask"]):
            if c == TWO:
                block[...] = np.where(rng.random(block.shape) < 0.6, show, off)
            elif c != VALUES or kind == "bool":
                block[...] = {SHOWN: show, HIDDEN: hide, VALUES: off}.get(c, block)

    def device_edit(m):
        to = (lambda v: v) if kind == "bool" else (lambda v: cases.to_device(np.array(v), dtype_of(m.dtype))[0])
        for c, block in blocks(m):
            if c == SHOWN:
                block[...] = to(hide)
            elif c == HIDDEN:
                block[...] = to(show)
            elif c == TWO and kind == "bool":
                block[...] = ~block
            elif c == TWO:
                block[block == to(show)] = to(np.nan)

    return edit, device_edit


def dtype_of(np_dtype):
    return {np.float16: "float16", np.float32: "float32", np.uint16: "bfloat16"}[np.dtype(np_dtype).type]


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mask_blocks_shown_read_no_mask_hidden_are_skipped(prog, kind, dtype):
    """Every class in every query block and head, ragged rows and keys, the
    mask broadcast over the batch (one list for both): shown blocks read no
    mask, two-valued ones only their bits (and the off value), hidden ones
    are never visited."""
    _, bq, bk, _ = kernel_for(prog, dtype, 64, 64)
    edit, device_edit = block_classes(kind, lambda h, qb, kb: (h + qb + kb) % 4, bq, bk)
    run_case(prog, dtype=dtype, B=2, H_q=2, L_q=2 * bq + 5, L_k=3 * bk + 7, mask=kind,
             mask_shape=(1, 2, 2 * bq + 5, 3 * bk + 7), edit=edit, device_mask_edit=device_edit,
             seed=40)


@pytest.mark.parametrize("off", [-1e4, -np.inf, float(np.finfo(np.float32).min)])
@pytest.mark.parametrize("scale", [0.01, -0.3])
def test_mask_blocks_two_valued_off_values_and_scales(prog, off, scale):
    """Two-valued blocks add the query block's off value: to the raw
    products over the scale (a positive scale, where a tiny one overflows
    the off value to -inf), or to the scaled scores; every block two-valued,
    as in the benchmark's masks."""
    _, bq, bk, _ = kernel_for(prog, "float32", 64, 64)
    edit, device_edit = block_classes("additive", lambda h, qb, kb: TWO, bq, bk, off=off)
    run_case(prog, dtype="float32", L_q=2 * bq + 3, L_k=3 * bk, mask="additive", mask_shape=(2 * bq + 3, 3 * bk),
             edit=edit, device_mask_edit=device_edit, scale=scale, seed=45)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_mask_blocks_skipped_blocks_load_no_keys(prog, kind):
    """The last key block is hidden from every query, and the K and V
    buffers end before it: the emulator's address sanitizer reports any read
    past their end, so this passes only if no copy of a skipped block is
    ever started."""
    _, bq, bk, _ = kernel_for(prog, "float16", 64, 64)
    L_k = 4 * bk
    edit, device_edit = block_classes(
        kind, lambda h, qb, kb: HIDDEN if kb == 3 else [SHOWN, TWO, VALUES][(qb + kb) % 3], bq, bk)

    def truncate(_, dev):
        return np.ascontiguousarray(dev[:, :, : 3 * bk])

    run_case(prog, L_q=2 * bq + 1, L_k=L_k, H_q=1, mask=kind, mask_shape=(2 * bq + 1, L_k), edit=edit,
             device_mask_edit=device_edit, device_kv_edit=truncate, seed=46)


def test_mask_blocks_with_gqa_sinks_and_an_adversarial_schedule(prog):
    _, bq, bk, _ = kernel_for(prog, "float32", 32, 32)
    edit, device_edit = block_classes("bool", lambda h, qb, kb: (qb + 2 * kb) % 3, bq, bk)
    run_case(prog, dtype="float32", D=32, H_q=4, H_kv=2, L_q=2 * bq, L_k=4 * bk + 1, mask="bool",
             mask_shape=(2 * bq, 4 * bk + 1), sinks=True, edit=edit, device_mask_edit=device_edit,
             schedule=5, seed=41)


def test_mask_blocks_no_data_races(prog):
    """Skipped blocks change which blocks share the K/V buffers' turns."""
    _, bq, bk, _ = kernel_for(prog, "float32", 128, 128)
    edit, device_edit = block_classes("bool", lambda h, qb, kb: (qb + kb) % 3, bq, bk)
    run_case(prog, dtype="float32", D=128, L_q=2 * bq, L_k=5 * bk + 3, mask="bool",
             mask_shape=(2 * bq, 5 * bk + 3), edit=edit, device_mask_edit=device_edit,
             race_check=True, seed=44)


def test_mask_blocks_all_hidden_but_one(prog):
    """Only the last, ragged key block is visited."""
    _, bq, bk, _ = kernel_for(prog, "float16", 64, 64)
    L_k = 3 * bk + 9
    edit, device_edit = block_classes("additive", lambda h, qb, kb: VALUES if kb == 3 else HIDDEN, bq, bk)
    run_case(prog, L_q=bq, L_k=L_k, mask="additive", mask_shape=(bq, L_k), edit=edit,
             device_mask_edit=device_edit, seed=42)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_mask_blocks_fully_masked_row_keeps_every_block(prog, kind):
    """A row that sees no key makes its query block visit (and read) every
    block, hidden ones too: MLX gives it the mean of V over every key."""
    _, bq, bk, _ = kernel_for(prog, "float32", 64, 64)
    hide = False if kind == "bool" else np.finfo(np.float32).min

    def edit(x):
        x["mask"][..., :, bk : 2 * bk] = hide  # hidden for every query block
        x["mask"][..., 3, :] = hide

    fused, _, v = run_case(prog, dtype="float32", L_q=2 * bq, L_k=3 * bk, mask=kind,
                           mask_shape=(2 * bq, 3 * bk), edit=edit, seed=43)
    np.testing.assert_allclose(fused[:, :, 3], v.mean(axis=2), atol=1e-5)


# ---------------------------------------------------------------------------
# Sinks, numerics


@pytest.mark.parametrize("dtype", DTYPES if FULL else ["float16", "float32"])
def test_sinks(prog, dtype):
    run_case(prog, dtype=dtype, L_q=40, L_k=50, sinks=True, seed=16)


def test_sinks_with_bool_mask_and_gqa(prog):
    run_case(prog, H_q=4, H_kv=2, L_q=33, L_k=65, mask="bool", sinks=True, seed=17)


def test_large_logits_do_not_overflow_fp16(prog):
    """Scores far beyond float16's range: the kernel keeps them in fp32."""

    def edit(x):
        x["q"] *= 60.0
        x["k"] *= 60.0

    fused, _, _ = run_case(prog, dtype="float16", D=128, L_q=33, L_k=40, edit=edit, scale=1.0, seed=18)
    assert np.isfinite(fused).all()


def test_nan_in_queries_propagates_to_its_row_only(prog):
    def edit(x):
        x["q"][0, 1, 4, 7] = np.nan

    fused, _, _ = run_case(prog, dtype="float32", L_q=33, L_k=65, edit=edit, seed=19)
    assert np.isnan(fused[0, 1, 4]).all()
    assert np.isfinite(np.delete(fused[0, 1], 4, axis=0)).all()


def test_nan_in_values_propagates(prog):
    def edit(x):
        x["v"][0, 0, 50, 3] = np.nan

    fused, _, _ = run_case(prog, dtype="float32", L_q=20, L_k=65, edit=edit, seed=20)
    assert np.isnan(fused[0, 0, :, 3]).all()


def test_no_data_races(prog):
    """ThreadSanitizer with Metal's ordering (barriers, simdgroup ops): the
    K/V blocks in threadgroup memory are never written while read."""
    run_case(prog, L_q=40, L_k=70, causal=True, race_check=True, seed=24)
    run_case(prog, dtype="float32", D=128, L_q=33, L_k=40, mask="bool", race_check=True, seed=25)


@pytest.mark.parametrize("seed", [1, 2])
def test_adversarial_schedule(prog, seed):
    """Simdgroups run far ahead of each other: a missing barrier shows."""
    run_case(prog, L_q=64, L_k=70, causal=True, schedule=seed, seed=21)
    run_case(prog, dtype="float32", D=128, L_q=40, L_k=50, mask="bool", sinks=True, schedule=seed, seed=22)


# ---------------------------------------------------------------------------
# Variants of the body that only CUDA builds (tests/metal_emu/kernels/
# attention_variants.metal): head dims padded to whole fragments, and Q in
# threadgroup memory read a k step at a time behind a ring of two stages.

VARIANTS = [
    ("float32", 20, 12, "", dict(causal=True, sinks=True, H_q=4, H_kv=2, L_q=41, L_k=35)),
    ("float32", 20, 20, "", dict(mask="bool", L_q=33, L_k=50, layout="blhd")),
    ("float32", 20, 12, "_qs", dict(mask="additive", H_q=4, H_kv=2, L_q=70, L_k=50)),
    ("float32", 20, 12, "_qs", dict(causal=True, L_q=40, L_k=70, schedule=3)),
    ("float16", 64, 64, "_qs", dict(causal=True, sinks=True, L_q=65, L_k=47)),
    ("bfloat16", 192, 128, "_qs", dict(mask="bool", sinks=True, L_q=33, L_k=40)),
]


@pytest.fixture(scope="module")
def variants():
    return emu.load("tests/metal_emu/kernels/attention_variants.metal")


@pytest.mark.parametrize("case", range(len(VARIANTS)))
def test_cuda_only_variants(variants, case):
    dtype, D, D_v, suffix, kwargs = VARIANTS[case]
    run_case(variants, dtype=dtype, D=D, D_v=D_v, suffix=suffix, seed=100 + case, **kwargs)


def test_padded_variant_races(variants):
    run_case(variants, dtype="float32", D=20, D_v=12, suffix="_qs", L_q=40, L_k=40, causal=True,
             race_check=True, seed=110)


# ---------------------------------------------------------------------------
# The strided copy the host runs on inputs whose head dim is not contiguous


class StridedCopyParams(ctypes.Structure):
    """fa::StridedCopyParams (mlx_fused_attn/families/strided_copy/strided_copy_params.h)."""

    _fields_ = [("shape", ctypes.c_int * 4), ("strides", ctypes.c_int64 * 4)]


@pytest.mark.parametrize(
    "dtype,shape,perm",
    [
        (np.float16, (2, 3, 5, 8), (0, 1, 3, 2)),  # [B, H, D, L] seen as [B, H, L, D]
        (np.float32, (4, 3, 2, 6), (3, 2, 1, 0)),  # every axis reversed
        (np.uint16, (1, 1, 1, 7), None),  # sinks [H] with a stride of 3, bfloat bits
    ],
)
def test_strided_copy(dtype, shape, perm):
    prog = emu.load("mlx_fused_attn/families/strided_copy/strided_copy.metal")
    rng = np.random.default_rng(sum(shape))
    if perm is None:
        base = rng.integers(0, 2**16, size=3 * shape[-1]).astype(dtype)
        view = base[::3].reshape(shape)
        strides = (0, 0, 0, 3)
    else:
        inv = np.argsort(perm)
        base = rng.standard_normal(tuple(np.array(shape)[list(perm)])).astype(dtype)
        view = base.transpose(inv)
        strides = tuple(s // base.itemsize for s in view.strides)
    name = {np.float16: "float16", np.float32: "float32", np.uint16: "bfloat16"}[dtype]
    params = StridedCopyParams(shape=shape, strides=strides)
    poison = np.full(view.size, np.nan, np.float32).astype(dtype) if dtype != np.uint16 else np.full(view.size, 0xFFFF, dtype)
    out = prog.launch(
        f"fa_strided_copy_{name}",
        {0: base, 1: poison, 2: params},
        grid=(1, shape[1], shape[0]),
        threadgroup=(shape[2] * shape[3], 1, 1),
    )
    np.testing.assert_array_equal(out[1].reshape(shape), view)


def test_strided_copy_padded_permuted_axes():
    """B = 2, H = 3, every source axis padded (with NaN) and the axes stored
    out of order, so that each of the four strides is its own."""
    prog = emu.load("mlx_fused_attn/families/strided_copy/strided_copy.metal")
    shape = (2, 3, 4, 5)
    values = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    src, strides = Layout((1, 3, 0, 2), (1, 2, 1, 3)).place(values, np.nan)
    out = prog.launch(
        "fa_strided_copy_float32",
        {0: src, 1: np.full(values.size, np.nan, np.float32), 2: StridedCopyParams(shape=shape, strides=strides)},
        grid=(1, shape[1], shape[0]),
        threadgroup=(shape[2] * shape[3], 1, 1),
    )
    np.testing.assert_array_equal(out[1].reshape(shape), values)


def test_strided_copy_instances():
    """The host asks for fa_strided_copy_<dtype> for each kernel dtype
    (strided_copy_kernel_name, whose pipeline backend/metal/attention_dispatch.cpp
    asks for); the list holds exactly those, each launched by
    test_strided_copy."""
    assert set(emu.load("mlx_fused_attn/families/strided_copy/strided_copy.metal").kernels) == {f"fa_strided_copy_{t}" for t in DTYPES}


# ---------------------------------------------------------------------------
# Kernel names and the JIT source


def test_host_kernel_names_match_the_instantiation_list(prog, tmp_path):
    """attention_kernel_name() with choose_attention_tiles(), for the
    default and every variant (MetalAttnVariant), and
    split_combine_kernel_name(), name exactly the kernels
    mlx_fused_attn/families/attention/attention.metal instantiates."""
    main = tmp_path / "names.cpp"
    main.write_text(
        '#include <cstdio>\n#include "mlx_fused_attn/kernels/attention_kernel_name.h"\n'
        "int main() {\n"
        "  const fa::DType dtypes[] = {fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};\n"
        "  for (fa::DType t : dtypes)\n"
        "    for (int d = 1; d <= 256; ++d)\n"
        "      for (int dv = 1; dv <= 256; ++dv)\n"
        "        for (bool q_threadgroup : {false, true})\n"
        "          for (int bk : {0, 16, 32})\n"
        "            if (fa::attention_head_dims_supported(d, dv))\n"
        '              std::printf("%s\\n", fa::attention_kernel_name(t, d, dv,\n'
        "                  fa::choose_attention_tiles(d, dv, t, fa::Backend::Metal, false, false,\n"
        "                      {q_threadgroup, bk})).c_str());\n"
        "  for (fa::DType t : dtypes)\n"
        '    std::printf("%s\\n", fa::split_combine_kernel_name(t).c_str());\n'
        "}\n"
    )
    exe = tmp_path / "names"
    subprocess.run([emu.CXX, "-std=c++17", "-I", emu.REPO_ROOT, str(main), "-o", str(exe)], check=True)
    host = set(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
    assert host == set(prog.kernels)
    # Three tile variants at D = 128 in each 16-bit dtype.
    assert len(host) == len(DTYPES) * (len(HEAD_DIMS) + 1) + 2 * 3


def test_flattened_jit_source_is_self_contained_and_matches(prog):
    """The attention family's JIT text has no quoted includes left and holds
    every kernel of the source; the one-kernel text the JIT compiles for a
    call computes exactly what the source does."""
    text = jit_text.family_text("attention")
    assert not re.search(r'^\s*#\s*include\s*"', text, re.MULTILINE)
    assert emu.instance_names(jit_text.write_family("attention")) == emu.instance_names(METAL)
    jit = emu.load(jit_text.write_kernel("attention", kernel_for(prog, "bfloat16", 80, 80)[0]))
    fused_aot, _, _ = run_case(prog, dtype="bfloat16", D=80, L_q=40, L_k=33, causal=True, sinks=True, seed=23)
    fused_jit, _, _ = run_case(jit, dtype="bfloat16", D=80, L_q=40, L_k=33, causal=True, sinks=True, seed=23)
    np.testing.assert_array_equal(fused_aot, fused_jit)


if FULL:

    @pytest.mark.parametrize(
        "dtype,D,D_v,mask,causal,sinks",
        [
            (t, d, dv, m, c, s)
            for t, (d, dv), m, c, s in itertools.product(
                DTYPES, HEAD_DIMS, [None, "bool", "additive"], [False, True], [False, True]
            )
            if not (m and c)
        ],
    )
    def test_full_sweep(prog, dtype, D, D_v, mask, causal, sinks):
        run_case(prog, dtype=dtype, D=D, D_v=D_v, L_q=65, L_k=47, H_q=2, mask=mask, causal=causal, sinks=sinks, seed=D)
