"""MLX 0.32.4's own Metal kernels, unmodified, in the emulator, against
float64 references; and MLX's steel attention against ours
(mlx_fused_attn/families/attention/attention.metal) on the same inputs.

MLX's kernels are right on Apple GPUs (Apple's compiler builds them every
release and MLX's tests run them on Macs), so where one fails here the
emulator's model of Metal is wrong: these tests check the emulator, as
test_mlx_plants.py shows by planting faults in it. The kernels come from
the pinned MLX's wheel (mlx_emu.py; the tests skip where PyPI is
unreachable and the wheel is not cached), instantiated in mlx_kernels/,
and are dispatched as MLX's host code dispatches them (grid, threadgroup,
buffer indices, function constants, parameter structs), read from MLX's
mlx/backend/metal/scaled_dot_product_attention.cpp, matmul.cpp,
softmax.cpp and reduce.cpp.
"""

import ctypes
import zlib

import numpy as np
import pytest

from . import cases, emu, mlx_emu
from .mlx_params import AttnMaskParams, AttnParams
from .test_attention_kernel import FC as OUR_FC
from .test_attention_kernel import METAL as OUR_METAL
from .test_attention_kernel import run_case as run_ours

TYPE_NAME = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32"}
# The steel attention instantiations of mlx_kernels/steel_attention.metal:
# (dtype, head dim) -> simdgroups across the head dimension (WN). MLX's host
# code picks bq 32, bk 32 below head dim 128 and 16 from it, wm 4.
STEEL_ATTENTION = {
    ("float16", 64): 1,
    ("float16", 128): 1,
    ("bfloat16", 64): 1,
    ("bfloat16", 128): 2,
    ("float32", 64): 1,
    ("float32", 128): 2,
}
# The steel attention's function constants (steel_attention.h).
ALIGN_Q, ALIGN_K, HAS_MASK, DO_CAUSAL, HAS_SINKS, SAVE_LSE = 200, 201, 300, 301, 302, 303
# The feature constants cases.run_case sets, at MLX's indices; MLX's kernel
# has no bool-mask constant (a bool mask is its own instantiation, which
# mlx_kernels/ leaves out), so no case here asks for one.
FEATURES = {"has_mask": HAS_MASK, "causal": DO_CAUSAL, "has_sinks": HAS_SINKS, "bool_mask": None}

# The grid: awkward lengths (partial query and key blocks, a single query,
# more queries than a block), grouped queries, several batches.
SHAPES = [
    dict(B=1, H_q=2, H_kv=2, L_q=33, L_k=65),
    dict(B=2, H_q=4, H_kv=1, L_q=65, L_k=127),
    dict(B=1, H_q=3, H_kv=3, L_q=1, L_k=33),
    dict(B=1, H_q=2, H_kv=1, L_q=127, L_k=127),
]
# Each shape with each of these, as MLX's host code allows them together.
VARIANTS = [
    dict(),
    dict(causal=True),
    dict(mask="additive"),
    dict(causal=True, mask="additive"),
    dict(sinks=True),
]


def steel_attention_name(dtype, D):
    t = TYPE_NAME[dtype]
    bk = 32 if D < 128 else 16
    wn = STEEL_ATTENTION[(dtype, D)]
    return f"steel_attention_{t}_bq32_bk{bk}_bd{D}_bv{D}_wm4_wn{wn}_mask{t}", bk, wn


def run_steel_attention(dtype, D, schedule="fair", defines=(), **case):
    """One case of MLX's steel attention through cases.run_case (inputs in
    independent layouts, the output NaN-poisoned and its padding checked,
    the float64 reference); returns (MLX's output, the reference)."""
    name, bk, wn = steel_attention_name(dtype, D)
    prog = mlx_emu.load("steel_attention", only=name, defines=defines)
    bq = 32

    def dispatch(buffers, constants, schedule, race_check):
        ours = buffers[4]
        B, H, L_q, L_k = ours.B, ours.H_q, ours.L_q, ours.L_k
        NQ, NK = -(-L_q // bq), -(-L_k // bk)
        params = AttnParams(
            B=B, H=H, D=D, qL=L_q, kL=L_k, gqa_factor=ours.gqa_factor,
            scale=ours.scale_log2 / np.log2(np.e), NQ=NQ, NK=NK,
            NQ_aligned=L_q // bq, NK_aligned=L_k // bk,
            qL_rem=L_q - L_q // bq * bq, kL_rem=L_k - L_k // bk * bk, qL_off=L_k - L_q,
            Q_strides=tuple(ours.q_strides), K_strides=tuple(ours.k_strides),
            V_strides=tuple(ours.v_strides), O_strides=tuple(ours.o_strides),
        )
        bound = {i: buffers[i] for i in range(4)}
        bound[4] = params
        if constants[HAS_MASK]:
            assert ours.mask_strides[3] == 1, "MLX reads a mask row contiguous"
            bound[5] = AttnMaskParams(M_strides=tuple(ours.mask_strides[:3]))
            bound[6] = buffers[5]
        if constants[HAS_SINKS]:
            bound[7] = buffers[6]
        mlx_constants = {
            ALIGN_Q: L_q % bq == 0, ALIGN_K: L_k % bk == 0, HAS_MASK: constants[HAS_MASK],
            DO_CAUSAL: constants[DO_CAUSAL], HAS_SINKS: constants[HAS_SINKS], SAVE_LSE: False,
        }
        return prog.launch(name, bound, constants=mlx_constants, grid=(NQ, H, B),
                           threadgroup=(32, 4, wn), schedule=schedule, race_check=race_check)

    launch = cases.Launch(name, grid=None, warps=None, constants={})
    features = {k: v for k, v in FEATURES.items() if v is not None}
    features["bool_mask"] = -1
    fused, ref, _ = cases.run_case(prog, launch, features, dtype=dtype, D=D, D_v=D,
                                   dispatch=dispatch, schedule=schedule, **case)
    return fused, ref


def shape_id(s):
    return f"B{s['B']}_H{s['H_q']}-{s['H_kv']}_L{s['L_q']}-{s['L_k']}"


@pytest.fixture(scope="module")
def ours():
    return emu.load(OUR_METAL)


INSTANCES = sorted(STEEL_ATTENTION)


@pytest.mark.parametrize("dtype,D", INSTANCES, ids=[f"{t}_d{d}" for t, d in INSTANCES])
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_steel_attention_matches_reference_and_ours(ours, dtype, D, shape):
    """MLX's steel attention against the float64 reference, and against our
    kernel on the same inputs (same seed, same layouts), each within the
    dtype's tolerance (cases.TOL): on every shape of the grid with two of
    the variants, in turn, so that every variant meets every instantiation."""
    turn = SHAPES.index(shape) + INSTANCES.index((dtype, D))
    for variant in (VARIANTS[turn % len(VARIANTS)], VARIANTS[(turn + 2) % len(VARIANTS)]):
        case = dict(shape, **variant)
        case["seed"] = zlib.crc32(repr((dtype, D, sorted(case.items()))).encode())
        fused_mlx, ref = run_steel_attention(dtype, D, **case)
        fused_ours, ref_ours, _ = run_ours(ours, dtype=dtype, D=D, **case)
        np.testing.assert_array_equal(ref, ref_ours)
        cases.check(fused_mlx, fused_ours, dtype, f"MLX's steel attention against ours: {case}")


def test_attention_params_layout_matches_the_kernel():
    name, _, _ = steel_attention_name("float16", 64)
    prog = mlx_emu.load("steel_attention", only=name)
    sizes = {p.index: p.element_size for p in prog.kernels[name] if p.kind == "buffer"}
    assert sizes[4] == ctypes.sizeof(AttnParams)
    assert sizes[5] == ctypes.sizeof(AttnMaskParams)


# ---------------------------------------------------------------------------
# The vector (decode) kernels: sdpa_vector, and the two-pass sdpa_vector_2pass_1
# then sdpa_vector_2pass_2, as MLX's sdpa_vector and sdpa_vector_2pass
# dispatch them (contiguous q, k, v; no mask).

# (dtype, head dim, the type's name in the host names of sdpa_vector.metal)
SDPA_VECTOR = [("float16", 64, "float16_t"), ("bfloat16", 128, "bfloat16_t"), ("float32", 128, "float")]
# (B, H_q, H_kv, L_q, L_k): one query or a few, keys not a multiple of 32.
SDPA_VECTOR_SHAPES = [(1, 4, 2, 1, 33), (2, 2, 1, 3, 127)]
# The vector kernels' function constants (sdpa_vector.h): has_mask,
# query_transposed, do_causal, bool_mask, float_mask, has_sinks, blocks.
SDPA_VECTOR_CONSTANTS = {20: False, 21: False, 22: False, 23: False, 24: False, 25: False}
# The first pass's key blocks: MLX's choice for a GPU neither "s" nor "d"
# with fewer than 4 simdgroups of queries a group.
BLOCKS = 32


def sdpa_vector_inputs(dtype, D, B, H_q, H_kv, L_q, L_k, seed):
    rng = np.random.default_rng(seed)
    q, q64 = cases.to_device(rng.standard_normal((B, H_q, L_q, D)), dtype)
    k, k64 = cases.to_device(rng.standard_normal((B, H_kv, L_k, D)), dtype)
    v, v64 = cases.to_device(rng.standard_normal((B, H_kv, L_k, D)), dtype)
    ref = cases.reference(q64, k64, v64, D**-0.5, dtype)
    out = np.full((B, H_q, L_q, D), cases.poison(dtype))
    strides = [
        np.array([k.strides[0 if H_kv == 1 else 1] // k.itemsize], np.uint64),
        np.array([D], np.uint64),
        np.array([v.strides[0 if H_kv == 1 else 1] // v.itemsize], np.uint64),
        np.array([D], np.uint64),
    ]
    return q, k, v, out, strides, ref


@pytest.mark.parametrize("dtype,D,tname", SDPA_VECTOR, ids=[t for t, _, _ in SDPA_VECTOR])
@pytest.mark.parametrize("shape", SDPA_VECTOR_SHAPES, ids=lambda s: "B{}_H{}-{}_L{}-{}".format(*s))
def test_sdpa_vector_matches_reference(dtype, D, tname, shape, defines=()):
    B, H_q, H_kv, L_q, L_k = shape
    q, k, v, out, (khs, kss, vhs, vss), ref = sdpa_vector_inputs(dtype, D, *shape, seed=L_k + D)
    name = f"sdpa_vector_{tname}_{D}_{D}"
    prog = mlx_emu.load("sdpa_vector", only=name, defines=defines)
    res = prog.launch(
        name,
        {0: q, 1: k, 2: v, 3: out, 4: np.array([H_q // H_kv], np.int32), 5: np.array([L_k], np.int32), 6: khs, 7: kss,
         8: vhs, 9: vss, 10: np.array([D**-0.5], np.float32)},
        constants={**SDPA_VECTOR_CONSTANTS, 26: BLOCKS},
        grid=(B * H_q, L_q, 1),
        threadgroup=(1024, 1, 1),
    )
    cases.check(cases.from_device(res[3], dtype), ref, dtype, f"{name} {shape}")


@pytest.mark.parametrize("dtype,D,tname", SDPA_VECTOR, ids=[t for t, _, _ in SDPA_VECTOR])
@pytest.mark.parametrize("shape", SDPA_VECTOR_SHAPES, ids=lambda s: "B{}_H{}-{}_L{}-{}".format(*s))
def test_sdpa_vector_two_pass_matches_reference(dtype, D, tname, shape, defines=()):
    B, H_q, H_kv, L_q, L_k = shape
    q, k, v, out, (khs, kss, vhs, vss), ref = sdpa_vector_inputs(dtype, D, *shape, seed=L_k * D)
    first, second = f"sdpa_vector_2pass_1_{tname}_{D}_{D}", f"sdpa_vector_2pass_2_{tname}_{D}"
    partials = np.full((B, H_q, L_q, BLOCKS, D), cases.poison(dtype))
    sums = np.full((B, H_q, L_q, BLOCKS), np.nan, np.float32)
    maxs = np.full((B, H_q, L_q, BLOCKS), np.nan, np.float32)
    res = mlx_emu.load("sdpa_vector", only=first, defines=defines).launch(
        first,
        {0: q, 1: k, 2: v, 3: partials, 4: sums, 5: maxs, 7: np.array([L_k], np.int32), 8: khs, 9: kss,
         10: vhs, 11: vss, 12: np.array([D**-0.5], np.float32)},
        constants={**SDPA_VECTOR_CONSTANTS, 26: BLOCKS},
        grid=(H_kv, B, BLOCKS),
        threadgroup=(32, H_q // H_kv, L_q),
    )
    res = mlx_emu.load("sdpa_vector", only=second, defines=defines).launch(
        second,
        {0: res[3], 1: res[4], 2: res[5], 3: out, 4: np.array([BLOCKS], np.int32)},
        constants={**SDPA_VECTOR_CONSTANTS, 26: BLOCKS},
        grid=(B * H_q, L_q, 1),
        threadgroup=(1024, 1, 1),
    )
    cases.check(cases.from_device(res[3], dtype), ref, dtype, f"{first} + {second} {shape}")
