"""metal/attention.metal run in the Metal emulator against a float64 reference.

Every case binds buffers the way mlx_fused_attn/backend/metal/attention_metal.cpp
does (q 0, k 1, v 2, out 3, params 4, mask 5, sinks 6; grid (query blocks,
H_q, B), threadgroup (32, warps)), poisons the output with NaN first, and
checks every output element, plus the padding around the output rows, which
must stay untouched. The semantics are those of MLX 0.32.4's
mx.fast.scaled_dot_product_attention: a masked score becomes finfo(dtype).min,
so fully masked rows give the mean of V (or 0 with a sink); sinks are raw
logits beside the scaled scores; an all -inf additive row gives NaN.

FA_EMU_SWEEP=full widens the sweep (every dtype x head dim x mask kind).
"""

import ctypes
import itertools
import os
import re
import subprocess

import numpy as np
import pytest

from . import emu, jit_text
from .attn_params import AttnParams

METAL = "metal/attention.metal"
HEAD_DIMS = (32, 64, 80, 96, 128)
DTYPES = ("float16", "bfloat16", "float32")
FULL = os.environ.get("FA_EMU_SWEEP", "") == "full"

# Feature function constants (mlx_fused_attn/kernels/attention_features.h).
FC = {"has_mask": 300, "bool_mask": 301, "causal": 302, "has_sinks": 303, "align_q": 200, "align_k": 201}

# |fused - float64 reference| <= ATOL + RTOL * |reference|: the kernel works in
# fp32, so what remains is the rounding of the output to its dtype (half an
# ulp: 2^-11 for float16, 2^-8 for bfloat16) plus fp32 accumulation.
TOL = {"float16": (5e-4, 2e-3), "bfloat16": (4e-3, 1.6e-2), "float32": (2e-5, 1e-4)}


@pytest.fixture(scope="module")
def prog():
    return emu.load(METAL)


def kernel_for(prog, dtype, head_dim):
    """(host name, bq, bk, warps) of the kernel the instantiation list has."""
    pat = re.compile(rf"fa_attention_{dtype}_d{head_dim}_bq(\d+)_bk(\d+)_wm(\d+)$")
    found = [(n, *map(int, m.groups())) for n in prog.kernels for m in [pat.match(n)] if m]
    assert len(found) == 1, f"{dtype} d{head_dim}: kernels {found}"
    return found[0]


# ---------------------------------------------------------------------------
# Inputs in the kernel's dtype: (device array, float64 values it holds).


def to_device(x, dtype):
    x = np.asarray(x, dtype=np.float32)
    if dtype == "bfloat16":
        bits = emu.float_to_bfloat16_bits(x)
        return bits, emu.bfloat16_bits_to_float(bits).astype(np.float64)
    dev = x.astype(dtype)
    return dev, dev.astype(np.float64)


def from_device(x, dtype):
    if dtype == "bfloat16":
        return emu.bfloat16_bits_to_float(x).astype(np.float64)
    return x.astype(np.float64)


def finfo_min(dtype):
    if dtype == "bfloat16":
        return float(emu.bfloat16_bits_to_float(np.array([0xFF7F], np.uint16))[0])
    return float(np.finfo(dtype).min)


def strided(values, layout, pad=0):
    """values [B, H, L, D] stored in `layout`: "bhld" (rows padded by `pad`
    extra rows per head) or "blhd" (the [B, L, H, D] transpose). Returns
    (storage, view with the storage's strides in elements)."""
    B, H, L, D = values.shape
    if layout == "bhld":
        store = np.zeros((B, H, L + pad, D), values.dtype)
        view = store[:, :, :L, :]
    else:
        store = np.zeros((B, L, H, D), values.dtype)
        view = store.transpose(0, 2, 1, 3)
    view[...] = values
    return store, tuple(s // values.itemsize for s in view.strides)


# ---------------------------------------------------------------------------
# Reference


def reference(q, k, v, scale, dtype, causal=False, bool_mask=None, add_mask=None, sinks=None):
    """float64 attention with MLX's semantics; inputs are float64 arrays."""
    H_q, H_kv = q.shape[1], k.shape[1]
    k = np.repeat(k, H_q // H_kv, axis=1)
    v = np.repeat(v, H_q // H_kv, axis=1)
    s = scale * (q @ k.transpose(0, 1, 3, 2))
    L_q, L_k = s.shape[-2:]
    masked = finfo_min(dtype)
    if causal:
        i = np.arange(L_q)[:, None]
        j = np.arange(L_k)[None, :]
        s = np.where(j <= i + (L_k - L_q), s, masked)
    if bool_mask is not None:
        s = np.where(bool_mask, s, masked)
    if add_mask is not None:
        s = s + add_mask
    if sinks is not None:
        sink_col = np.broadcast_to(sinks[None, :, None, None], s.shape[:-1] + (1,))
        s = np.concatenate([sink_col, s], axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        m = s.max(axis=-1, keepdims=True)
        p = np.exp(s - m)
        p = p / p.sum(axis=-1, keepdims=True)
    if sinks is not None:
        p = p[..., 1:]
    return p @ v


# ---------------------------------------------------------------------------
# One launch


def run_case(
    prog,
    *,
    dtype="float16",
    D=64,
    B=1,
    H_q=2,
    H_kv=None,
    L_q=33,
    L_k=65,
    causal=False,
    mask=None,
    mask_shape=None,
    sinks=False,
    layout="bhld",
    seed=0,
    schedule="fair",
    race_check=False,
    edit=None,
    scale=None,
):
    """Runs one case and checks it. mask: None, "bool" or "additive", of
    mask_shape (broadcast to [B, H_q, L_q, L_k] through zero strides).
    edit(inputs) may change the float32 inputs (a dict) before the launch.
    Returns the fused output, the reference and v, as float64."""
    H_kv = H_kv or H_q
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    inputs = {
        "q": rng.standard_normal((B, H_q, L_q, D)).astype(np.float32),
        "k": rng.standard_normal((B, H_kv, L_k, D)).astype(np.float32),
        "v": rng.standard_normal((B, H_kv, L_k, D)).astype(np.float32),
        "sinks": rng.standard_normal(H_q).astype(np.float32) if sinks else None,
    }
    mask_shape = tuple(mask_shape or (B, H_q, L_q, L_k))
    if mask == "bool":
        inputs["mask"] = rng.random(mask_shape) < 0.7
    elif mask == "additive":
        inputs["mask"] = rng.standard_normal(mask_shape).astype(np.float32)
    if edit is not None:
        edit(inputs)

    name, bq, bk, warps = kernel_for(prog, dtype, D)
    q_dev, q64 = to_device(inputs["q"], dtype)
    k_dev, k64 = to_device(inputs["k"], dtype)
    v_dev, v64 = to_device(inputs["v"], dtype)
    q_store, q_str = strided(q_dev, layout, pad=1)
    k_store, k_str = strided(k_dev, layout, pad=3)
    v_store, v_str = strided(v_dev, layout, pad=2)
    out_nan = to_device(np.full((B, H_q, L_q, D), np.nan, np.float32), dtype)[0]
    o_store, o_str = strided(out_nan, "bhld", pad=2)
    o_store[...] = out_nan.flat[0]

    ref_kwargs = {}
    buffers = {0: q_store, 1: k_store, 2: v_store, 3: o_store}
    mask_strides = (0, 0, 0, 0)
    if mask is not None:
        m = inputs["mask"]
        full = (B, H_q, L_q, L_k)
        if mask == "bool":
            dev, ref_kwargs["bool_mask"] = m, m
        else:
            dev, ref_kwargs["add_mask"] = to_device(m, dtype)
        dev = np.ascontiguousarray(dev)
        view = np.broadcast_to(dev.reshape((1,) * (4 - dev.ndim) + dev.shape), full)
        mask_strides = tuple(s // dev.itemsize for s in view.strides)
        buffers[5] = dev
    if sinks:
        buffers[6], ref_kwargs["sinks"] = to_device(inputs["sinks"], dtype)

    params = AttnParams(
        B=B,
        H_q=H_q,
        H_kv=H_kv,
        gqa_factor=H_q // H_kv,
        L_q=L_q,
        L_k=L_k,
        D=D,
        D_v=D,
        causal_offset=L_k - L_q,
        scale_log2=scale * np.log2(np.e),
        q_strides=q_str[:3],
        k_strides=k_str[:3],
        v_strides=v_str[:3],
        o_strides=o_str[:3],
        mask_strides=mask_strides,
    )
    buffers[4] = params
    constants = {
        FC["has_mask"]: mask is not None,
        FC["bool_mask"]: mask == "bool",
        FC["causal"]: causal,
        FC["has_sinks"]: sinks,
        FC["align_q"]: L_q % bq == 0,
        FC["align_k"]: L_k % bk == 0,
    }
    res = prog.launch(
        name,
        buffers=buffers,
        constants=constants,
        grid=(-(-L_q // bq), H_q, B),
        threadgroup=(32, warps, 1),
        schedule=schedule,
        race_check=race_check,
    )
    o_all = from_device(res[3], dtype)
    fused = o_all[:, :, :L_q, :]
    assert np.isnan(o_all[:, :, L_q:, :]).all(), "the kernel wrote past the last query row"

    ref = reference(q64, k64, v64, scale, dtype, causal=causal, **ref_kwargs)
    atol, rtol = TOL[dtype]
    np.testing.assert_allclose(
        fused,
        ref,
        atol=atol,
        rtol=rtol,
        err_msg=f"{name} L_q={L_q} L_k={L_k} B={B} H_q={H_q} H_kv={H_kv} causal={causal} "
        f"mask={mask} sinks={sinks} layout={layout} seed={seed}",
    )
    return fused, ref, v64


def test_params_layout_matches_the_kernel(prog):
    for name, params in prog.kernels.items():
        (p,) = [p for p in params if p.kind == "buffer" and p.index == 4]
        assert p.element_size == ctypes.sizeof(AttnParams), name


# ---------------------------------------------------------------------------
# Every dtype and head dim, ragged both ways


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", HEAD_DIMS)
def test_dtypes_and_head_dims(prog, dtype, D):
    lengths = [(33, 47), (65, 33)] if FULL else [(33, 47)]
    for seed, (L_q, L_k) in enumerate(lengths):
        run_case(prog, dtype=dtype, D=D, L_q=L_q, L_k=L_k, H_q=2, seed=seed)


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
# The strided copy the host runs on inputs whose head dim is not contiguous


class StridedCopyParams(ctypes.Structure):
    """fa::StridedCopyParams (mlx_fused_attn/kernels/strided_copy_params.h)."""

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
    prog = emu.load("metal/strided_copy.metal")
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


# ---------------------------------------------------------------------------
# Kernel names and the JIT source


def test_host_kernel_names_match_the_instantiation_list(prog, tmp_path):
    """attention_kernel_name() with choose_attention_tiles() names exactly
    the kernels metal/attention.metal instantiates."""
    main = tmp_path / "names.cpp"
    main.write_text(
        '#include <cstdio>\n#include "mlx_fused_attn/kernels/attention_kernel_name.h"\n'
        "int main() {\n"
        "  const fa::DType dtypes[] = {fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};\n"
        "  for (fa::DType t : dtypes)\n"
        "    for (int d = 1; d <= 256; ++d)\n"
        "      if (fa::attention_head_dim_supported(d))\n"
        "        for (bool causal : {false, true})\n"
        '          std::printf("%s\\n", fa::attention_kernel_name(t, d,\n'
        "              fa::choose_attention_tiles(d, t, fa::Backend::Metal, causal, false)).c_str());\n"
        "}\n"
    )
    exe = tmp_path / "names"
    subprocess.run([emu.CXX, "-std=c++17", "-I", emu.REPO_ROOT, str(main), "-o", str(exe)], check=True)
    host = set(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
    assert host == set(prog.kernels)
    assert len(host) == len(DTYPES) * len(HEAD_DIMS)


def test_flattened_jit_source_is_self_contained_and_matches(prog):
    """The attention family's JIT text (its own library at run time) has no
    quoted includes left, holds every kernel of the source, and computes
    exactly what the source does."""
    text = jit_text.family_text("attention")
    assert not re.search(r'^\s*#\s*include\s*"', text, re.MULTILINE)
    jit = emu.load(jit_text.write_family("attention"))
    assert set(prog.kernels) == set(jit.kernels)
    fused_aot, _, _ = run_case(prog, dtype="bfloat16", D=80, L_q=40, L_k=33, causal=True, sinks=True, seed=23)
    fused_jit, _, _ = run_case(jit, dtype="bfloat16", D=80, L_q=40, L_k=33, causal=True, sinks=True, seed=23)
    np.testing.assert_array_equal(fused_aot, fused_jit)


if FULL:

    @pytest.mark.parametrize(
        "dtype,D,mask,causal,sinks",
        [
            (t, d, m, c, s)
            for t, d, m, c, s in itertools.product(DTYPES, HEAD_DIMS, [None, "bool", "additive"], [False, True], [False, True])
            if not (m and c)
        ],
    )
    def test_full_sweep(prog, dtype, D, mask, causal, sinks):
        run_case(prog, dtype=dtype, D=D, L_q=65, L_k=47, H_q=2, mask=mask, causal=causal, sinks=sinks, seed=D)
