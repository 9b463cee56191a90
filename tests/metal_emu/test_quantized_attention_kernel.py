"""families/quantized_attention/quantized_attention.metal run in the Metal emulator against a
float64 reference of dequantize-then-attend, within the float kernels'
tolerance in the same dtype (cases.TOL).

K and V are MLX's affine layout (mx.quantize): random codes packed as a
little-endian bit stream into uint32 words, a scale and a bias in the
element type per group. The reference dequantizes them as mx.dequantize
does, into the element type (scale * code + bias in fp32, rounded once, as
the kernel's loader computes it), and attends in float64: the float
kernels' reference given those K and V. (Against the values unrounded, a
float16 kernel is off by up to about 1e-3 where |K| nears 2: the rounding
of K to float16 moves the scores, which no tolerance of the float path
allows for.) Each
quantized array is stored as mlx-lm's QuantizedKVCache holds it, a view of
a longer buffer (spare key rows, poisoned), each with its own strides.
Buffers and function constants are bound as families/quantized_attention/quantized_attention.metal
lists them; the output is poisoned with NaN first and every element is
checked, and its padding must stay untouched. Decode runs with split keys
and the family's combine, GQA packed as the host packs it
(test_split_keys_kernel.pack_gqa)."""

import subprocess

import numpy as np
import pytest

from . import cases, emu
from .attn_params import AttnParams
from .layouts import Layout
from .quant_kv_params import QuantKvOperand, QuantKvParams
from .test_attention_kernel import FC
from .test_split_keys_kernel import SPLIT_KEYS, pack_gqa

METAL = "mlx_fused_attn/families/quantized_attention/quantized_attention.metal"
HEAD_DIMS = (32, 64, 96, 128, 192, 256)  # FA_QUANTIZED_ATTENTION_HEAD_DIMS
BITS = (4, 8)  # FA_QUANTIZED_ATTENTION_BITS
GROUPS = (32, 64, 128)
DTYPES = ("float16", "bfloat16", "float32")

# Spare key rows after each quantized array's rows (words, scales, biases),
# different for each, as a cache's allocation step leaves them.
SPARE_ROWS = {"k": (5, 3, 7), "v": (2, 6, 4)}


def scale_layout(x):
    """K's scales as a cache holds them; V's with the group axis outermost,
    so that a row's scales step by a stride of their own (the op admits
    any group stride: QuantKvOperand.scale_group_stride)."""
    if x == "k":
        return Layout((0, 1, 2, 3), (0, 0, SPARE_ROWS["k"][1], 0))
    return Layout((3, 0, 1, 2), (1, 0, 0, SPARE_ROWS["v"][1]))


@pytest.fixture(scope="module")
def prog():
    return emu.load(METAL)


def kernel_for(prog, dtype, D, bits, suffix=""):
    """(host name, bq, bk, warps) of the instance for (dtype, D, bits)
    whose name ends in `suffix` past its tiles."""
    prefix = f"fa_quantized_attention_{dtype}_d{D}_b{bits}_"
    (name,) = [n for n in prog.kernels if n.startswith(prefix) and n.endswith(suffix)]
    tiles = name[len(prefix):len(name) - len(suffix)]
    bq, bk, warps = (int(part[2:]) for part in tiles.split("_"))
    return name, bq, bk, warps


# ---------------------------------------------------------------------------
# MLX's affine layout


def pack(codes, bits):
    """uint32 words of `codes` (ints < 2**bits along the last axis) as one
    little-endian bit stream a row, value i at bits i * bits onwards."""
    stream = (codes[..., None].astype(np.uint64) >> np.arange(bits, dtype=np.uint64)) & 1
    stream = stream.reshape(codes.shape[:-1] + (-1, 32))
    return (stream << np.arange(32, dtype=np.uint64)).sum(-1).astype(np.uint32)


def quantized(rng, shape, bits, group, dtype):
    """Random codes with scales and biases in `dtype` spreading them over
    about [-2, 2]: (words, scales, biases in the kernel's dtype, the values
    they dequantize to as mx.dequantize gives them: in `dtype`, here as
    float64)."""
    codes = rng.integers(0, 2**bits, shape)
    groups = shape[:-1] + (shape[-1] // group,)
    spread = rng.uniform(0.5, 1.5, groups)
    scales, s64 = cases.to_device(spread * 4 / (2**bits - 1), dtype)
    biases, b64 = cases.to_device(-2 * spread + 0.1 * rng.standard_normal(groups), dtype)
    _, values = cases.to_device(codes * np.repeat(s64, group, -1) + np.repeat(b64, group, -1), dtype)
    return pack(codes, bits), scales, biases, values


def test_pack_is_mlx_layout():
    """pack() and the reference's dequantization agree with mx.quantize's
    layout: mx.dequantize of the packed codes gives the reference's values."""
    mx = pytest.importorskip("mlx.core")
    rng = np.random.default_rng(0)
    for bits in (2, 3, 4, 5, 6, 8):
        for group in GROUPS:
            words, scales, biases, values = quantized(rng, (3, 256), bits, group, "float32")
            got = mx.dequantize(mx.array(words), mx.array(scales), mx.array(biases), group_size=group, bits=bits)
            np.testing.assert_allclose(np.array(got), values, rtol=1e-6, atol=1e-6)
            w, _, _ = mx.quantize(mx.array(values.astype(np.float32)), group_size=group, bits=bits)
            assert np.array(w).shape == words.shape and np.array(w).dtype == np.uint32


# ---------------------------------------------------------------------------
# One case


def run_quant(prog, *, dtype="float16", D=64, bits=4, group=32, B=1, H_q=2, H_kv=None, L_q=33, L_k=65,
              causal=False, mask=None, mask_shape=None, sinks=False, n_splits=1, packed=False, seed=0,
              schedule="fair", race_check=False, suffix="", mask_blocks=True):
    """One case of the quantized kernel (with n_splits > 1 or packed, the
    split kernel and the combine), checked against the float64 reference.
    suffix: the instance's name past its tiles (kernel_for); mask_blocks:
    whether an array mask comes with its classes by block, as the Metal
    host binds them (CUDA's binds none)."""
    H_kv = H_kv or H_q
    name, bq, bk, warps = kernel_for(prog, dtype, D, bits, suffix)
    rng = np.random.default_rng(seed)
    quant = {x: quantized(rng, (B, H_kv, L_k, D), bits, group, dtype) for x in "kv"}
    inputs = {
        "q": rng.standard_normal((B, H_q, L_q, D)).astype(np.float32),
        "k": quant["k"][3].astype(np.float32),
        "v": quant["v"][3].astype(np.float32),
        "sinks": rng.standard_normal(H_q).astype(np.float32) if sinks else None,
    }
    if mask == "bool":
        inputs["mask"] = rng.random(mask_shape or (B, H_q, L_q, L_k)) < 0.7
    elif mask == "additive":
        inputs["mask"] = rng.standard_normal(mask_shape or (B, H_q, L_q, L_k)).astype(np.float32)
    # q, the output, the mask and sinks as the float kernels' tests place
    # them; K and V (buffers 1 and 2 there) are replaced by their words.
    buffers, strides, ref_kwargs, places, (q64, _, _) = cases.place_inputs(inputs, dtype, "bhld", None, mask)
    operands = {}
    for x, first in (("k", 12), ("v", 14)):
        words, scales, biases, _ = quant[x]
        pads = SPARE_ROWS[x]
        buffers[1 if x == "k" else 2], w = Layout((0, 1, 2, 3), (0, 0, pads[0], 0)).place(words, 0xFFFFFFFF)
        buffers[first], s = scale_layout(x).place(scales, cases.poison(dtype))
        buffers[first + 1], b = Layout((0, 1, 2, 3), (0, 0, pads[2], 0)).place(biases, cases.poison(dtype))
        operands[x] = QuantKvOperand(word_strides=w[:3], scale_strides=s[:3], bias_strides=b[:3],
                                     scale_group_stride=s[3], bias_group_stride=b[3])
    buffers[16] = QuantKvParams(group_size=group, bits=bits, **operands)

    scale = 1.0 / np.sqrt(D)
    params = AttnParams(
        B=B, H_q=H_q, H_kv=H_kv, gqa_factor=H_q // H_kv, L_q=L_q, L_k=L_k, D=D, D_v=D,
        causal_offset=L_k - L_q, scale_log2=scale * np.log2(np.e),
        q_strides=strides["q"][:3], o_strides=strides["out"][:3], mask_strides=strides["mask"],
        mask_pairs=cases.mask_pairs(mask, L_k, strides["mask"]),
    )
    if packed:
        params = pack_gqa(params)
    # The classes by block, as the host binds them: to packed GQA only where
    # the heads share the mask.
    heads_share = mask_shape is not None and (len(mask_shape) < 3 or mask_shape[-3] == 1)
    if mask is not None and mask_blocks and (heads_share or not packed):
        ref_mask = ref_kwargs.get("bool_mask", ref_kwargs.get("add_mask"))
        blocks = cases.mask_visits(ref_mask, mask, params.L_q, L_k, bq, bk)
        buffers[11] = blocks
        params.mask_block_strides[:] = tuple(
            st // 4 if n > 1 else 0 for st, n in zip(blocks.strides[:2], blocks.shape[:2])
        ) + cases.visit_rows(L_k, bk)
    buffers[4] = params

    split = n_splits > 1 or packed
    constants = {index: False for index in prog.constants}
    constants.update({
        FC["has_mask"]: mask is not None,
        FC["bool_mask"]: mask == "bool",
        FC["causal"]: causal and not packed,
        FC["has_sinks"]: sinks,
        FC["align_q"]: params.L_q % bq == 0,
        FC["align_k"]: L_k % bk == 0,
        FC["mask_blocks"]: 11 in buffers,
        SPLIT_KEYS: split,
    })
    grid = (-(-params.L_q // bq) * n_splits, params.H_q, params.B)
    if split:
        rows = params.B * params.H_q * params.L_q
        buffers[7] = np.full((n_splits, rows, D), np.nan, np.float32)
        buffers[8] = np.full((2, n_splits, rows), np.nan, np.float32)
        buffers[9] = np.array([n_splits], np.int32)
    res = prog.launch(name, buffers=buffers, constants=constants, grid=grid, threadgroup=(32, warps, 1),
                      schedule=schedule, race_check=race_check)
    if split:
        assert not np.isnan(res[7]).any() and not np.isnan(res[8]).any(), "a partial row was not written"
        res = prog.launch(
            f"fa_quantized_split_combine_{dtype}",
            buffers={3: buffers[3], 4: params, 7: res[7], 8: res[8], 9: buffers[9]},
            constants=constants,
            grid=(-(-params.L_q * D // 96), params.H_q, params.B),
            threadgroup=(96, 1, 1),
            schedule=schedule,
        )
    fused = cases.output(res[3], places["out"], dtype)
    ref = cases.reference(q64, quant["k"][3], quant["v"][3], scale, dtype, causal=causal, **ref_kwargs)
    what = (f"{name} group={group} L_q={L_q} L_k={L_k} B={B} H_q={H_q} H_kv={H_kv} causal={causal} "
            f"mask={mask} sinks={sinks} splits={n_splits} packed={packed} seed={seed}")
    cases.check(fused, ref, dtype, what)
    return np.abs(fused - ref).max()


# ---------------------------------------------------------------------------
# Prefill: every dtype, head dim, bits and group, ragged both ways


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", HEAD_DIMS)
@pytest.mark.parametrize("bits", BITS)
def test_dtypes_head_dims_bits_and_groups(prog, dtype, D, bits):
    for group in GROUPS:
        if D % group == 0:
            run_quant(prog, dtype=dtype, D=D, bits=bits, group=group, L_q=33, L_k=47, seed=D + bits + group)


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_prefill_with_gqa_and_sinks(prog, dtype):
    # L_q > L_k: rows that see no key.
    run_quant(prog, dtype=dtype, D=128, bits=4, group=64, H_q=4, H_kv=2, L_q=70, L_k=65, causal=True,
              sinks=True, seed=11)


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("mask_shape", [None, (1, 1, 40, 100)])
def test_array_masks(prog, kind, mask_shape):
    run_quant(prog, D=64, bits=8, group=64, B=2, H_q=2, L_q=40, L_k=100, mask=kind, mask_shape=mask_shape,
              seed=21)


def test_several_batches_and_heads(prog):
    run_quant(prog, dtype="bfloat16", D=96, bits=4, group=32, B=2, H_q=3, H_kv=3, L_q=64, L_k=96, seed=31)


# ---------------------------------------------------------------------------
# Decode: split keys and the combine, GQA packed


@pytest.mark.parametrize("n_splits", [1, 5])
@pytest.mark.parametrize("bits", BITS)
def test_decode_with_gqa_packed(prog, n_splits, bits):
    run_quant(prog, D=128, bits=bits, group=64, B=2, H_q=8, H_kv=2, L_q=1, L_k=500, n_splits=n_splits,
              packed=True, seed=41 + n_splits)


@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_with_sinks_and_a_padding_mask(prog, dtype):
    """Sinks (which the host never packs) and mlx-lm's batched-decoding
    padding mask [B, 1, 1, L_k], split keys over a ragged last block."""
    run_quant(prog, dtype=dtype, D=64, bits=4, group=32, B=2, H_q=4, H_kv=2, L_q=1, L_k=301, sinks=True,
              mask="bool", mask_shape=(2, 1, 1, 301), n_splits=3, seed=51)


@pytest.mark.parametrize("bits", BITS)
def test_head_dim_32_as_mlx_lm_runs_it(prog, bits):
    """D = 32 (one group of 32 a row: a chunk a row, so that three of the
    four simdgroups' threads load nothing) as mlx-lm's cache runs it: a
    causal prefill chunk with GQA, then decode with GQA packed and split
    keys."""
    run_quant(prog, D=32, bits=bits, group=32, B=2, H_q=4, H_kv=2, L_q=9, L_k=23, causal=True,
              seed=71 + bits)
    run_quant(prog, D=32, bits=bits, group=32, B=2, H_q=4, H_kv=2, L_q=1, L_k=75, n_splits=2,
              packed=True, seed=73 + bits)


def test_split_prefill_causal(prog):
    run_quant(prog, D=64, bits=8, group=32, L_q=40, L_k=300, causal=True, n_splits=4, seed=61)


def test_no_data_races(prog):
    run_quant(prog, D=64, bits=4, group=64, L_q=40, L_k=100, causal=True, n_splits=2, race_check=True)


@pytest.mark.parametrize("seed", [1, 2])
def test_adversarial_schedule(prog, seed):
    run_quant(prog, D=64, bits=4, group=32, H_q=4, H_kv=2, L_q=1, L_k=200, packed=True, n_splits=3,
              schedule=seed)


def test_host_kernel_names_match_the_instantiation_list(prog, tmp_path):
    """quantized_attention_kernel_name() with the Metal tiles of
    choose_quantized_attention_tiles(), for every call
    quantized_attention_covers takes, and quantized_split_combine_kernel_name()
    name exactly the kernels quantized_attention.metal instantiates."""
    main = tmp_path / "names.cpp"
    main.write_text(
        "#include <cstdio>\n"
        '#include "mlx_fused_attn/families/quantized_attention/quantized_attention_kernel_name.h"\n'
        "int main() {\n"
        "  const fa::DType dtypes[] = {fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};\n"
        "  for (fa::DType t : dtypes)\n"
        "    for (int d = 1; d <= 256; ++d)\n"
        "      for (int bits = 1; bits <= 8; ++bits)\n"
        "        for (int group : {32, 64, 128})\n"
        "          if (fa::quantized_attention_covers(d, d, bits, group))\n"
        '            std::printf("%s\\n", fa::quantized_attention_kernel_name(t, d, bits,\n'
        "                fa::choose_quantized_attention_tiles(d, t, fa::Backend::Metal)).c_str());\n"
        "  for (fa::DType t : dtypes)\n"
        '    std::printf("%s\\n", fa::quantized_split_combine_kernel_name(t).c_str());\n'
        "}\n"
    )
    exe = tmp_path / "names"
    subprocess.run([emu.CXX, "-std=c++17", "-I", emu.REPO_ROOT, str(main), "-o", str(exe)], check=True)
    host = set(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
    assert host == set(prog.kernels)
    assert len(host) == len(DTYPES) * (len(HEAD_DIMS) * len(BITS) + 1)
