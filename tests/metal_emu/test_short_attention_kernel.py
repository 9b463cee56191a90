"""mlx_fused_attn/families/short_attention/short_attention.metal (L_q, L_k <= 64, several sequences per
threadgroup) run in the Metal emulator against a float64 reference.

Every case binds buffers the way
mlx_fused_attn/backend/metal/attention_dispatch.cpp does (q 0, k 1, v 2,
out 3, params 4, mask 5, sinks 6; grid (ceil(B * H_q / problems), 1, 1),
threadgroup (32, warps)), with B * H_q not a multiple of the sequences per
threadgroup where the kernel has several, so the last threadgroup is partial.
The output is poisoned with NaN and every element checked, plus the padding
rows around each head's output, which must stay untouched (the inputs,
reference and check: cases.py).
"""

import ctypes
import re
import subprocess

import numpy as np
import pytest

from . import cases, emu, jit_text
from .attn_params import AttnParams
from .cases import INDEPENDENT

METAL = "mlx_fused_attn/families/short_attention/short_attention.metal"
DTYPES = ("float16", "bfloat16", "float32")
SEQS = (16, 32, 48, 64)
# Function constants (mlx_fused_attn/families/short_attention/short_attention_features.h).
FC = {"has_mask": 400, "bool_mask": 401, "causal": 402, "has_sinks": 403}
KERNEL = re.compile(r"fa_short_attention_(\w+?)_d(\d+)_s(\d+)_wr(\d+)_wm(\d+)_np(\d+)$")


@pytest.fixture(scope="module")
def prog():
    return emu.load(METAL)


def seq_for(L_q, L_k):
    """short_attention_seq: the smallest capacity holding both lengths."""
    return min(s for s in SEQS if s >= max(L_q, L_k))


def kernel_for(prog, dtype, D, seq):
    """(host name, warps, sequences per threadgroup)."""
    found = [
        (n, int(m.group(5)), int(m.group(6)))
        for n in prog.kernels
        for m in [KERNEL.match(n)]
        if m and (m.group(1), int(m.group(2)), int(m.group(3))) == (dtype, D, seq)
    ]
    assert len(found) == 1, f"{dtype} d{D} s{seq}: kernels {found}"
    return found[0]


def run_case(prog, *, dtype="float16", D=64, B=3, H_q=3, L_q=17, L_k=17, **case):
    """One case of the short kernel (cases.run_case takes the rest of
    `case`); q, k and v share the head dim."""
    name, warps, problems = kernel_for(prog, dtype, D, seq_for(L_q, L_k))
    launch = cases.Launch(name, grid=(-(-B * H_q // problems), 1, 1), warps=warps, constants={})
    return cases.run_case(prog, launch, FC, dtype=dtype, D=D, D_v=D, B=B, H_q=H_q, L_q=L_q, L_k=L_k, **case)


def test_params_layout_matches_the_kernel(prog):
    for name, params in prog.kernels.items():
        (p,) = [p for p in params if p.kind == "buffer" and p.index == 4]
        assert p.element_size == ctypes.sizeof(AttnParams), name


# ---------------------------------------------------------------------------
# Lengths, instances


@pytest.mark.parametrize("L", [1, 8, 16, 17, 31, 32, 48, 63, 64])
def test_lengths(prog, L):
    """B * H_q = 9 sequences: the last threadgroup holds fewer than the
    others wherever a threadgroup holds several (2 or 4 at D = 64)."""
    run_case(prog, L_q=L, L_k=L, seed=L)


@pytest.mark.parametrize("L_q,L_k", [(1, 64), (64, 1), (17, 9), (8, 40)])
def test_unequal_lengths(prog, L_q, L_k):
    run_case(prog, dtype="float32", D=32, L_q=L_q, L_k=L_k, seed=L_q * 100 + L_k)


def test_every_instance(prog):
    """Each kernel of the list, at ragged lengths of its capacity."""
    for i, name in enumerate(sorted(prog.kernels)):
        m = KERNEL.match(name)
        dtype, D, seq = m.group(1), int(m.group(2)), int(m.group(3))
        L_q, L_k = (seq - 3, seq) if i % 2 else (seq, seq - 5)
        run_case(prog, dtype=dtype, D=D, B=1, H_q=int(m.group(6)) + 1, L_q=L_q, L_k=L_k, seed=i)


def test_many_threadgroups(prog):
    """Sequences 8 to a threadgroup, 41 of them: six threadgroups, one partial."""
    run_case(prog, dtype="float16", D=32, B=41, H_q=1, L_q=9, L_k=12, causal=True, seed=4)


@pytest.mark.parametrize("layout", ["blhd", "bhld"])
def test_strided_inputs(prog, layout):
    """[B, L, H, D] transposed views and rows padded inside each head."""
    run_case(prog, dtype="bfloat16", D=64, B=2, H_q=3, L_q=20, L_k=30, layout=layout, seed=3)


@pytest.mark.parametrize("mask", [None, "bool", "additive"])
def test_independent_batch_and_head_strides(prog, mask):
    """B = 3, H_q = 4 over H_kv = 2 (12 sequences, 4 to a threadgroup), every
    input, the output and the mask in its own layout (cases.py's
    INDEPENDENT); sinks with the bool mask, causal without one."""
    run_case(prog, dtype="float16", D=64, B=3, H_q=4, H_kv=2, L_q=13, L_k=15, mask=mask,
             causal=mask is None, sinks=mask == "bool", layouts=INDEPENDENT, seed=31)


@pytest.mark.parametrize("H_q,H_kv", [(4, 2), (3, 1)])
def test_gqa(prog, H_q, H_kv):
    run_case(prog, B=3, H_q=H_q, H_kv=H_kv, L_q=24, L_k=31, causal=True, seed=H_q * 10 + H_kv)


# ---------------------------------------------------------------------------
# Causal, masks, sinks


@pytest.mark.parametrize("L_q,L_k", [(32, 32), (13, 29), (48, 20)])
def test_causal(prog, L_q, L_k):
    run_case(prog, L_q=L_q, L_k=L_k, causal=True, seed=L_q + L_k)


def test_causal_fully_masked_rows_are_the_mean_of_v(prog):
    """Rows 0..L_q-L_k-1 see no key: a uniform softmax over every key."""
    fused, _, v = run_case(prog, dtype="float32", D=32, L_q=50, L_k=20, causal=True, seed=5)
    mean_v = np.broadcast_to(v.mean(axis=2, keepdims=True), fused[:, :, :30].shape)
    np.testing.assert_allclose(fused[:, :, :30], mean_v, atol=1e-5)


def test_causal_with_sinks_fully_masked_rows_are_zero(prog):
    fused, _, _ = run_case(prog, dtype="float32", D=64, L_q=30, L_k=10, causal=True, sinks=True, seed=9)
    assert np.abs(fused[:, :, :20, :]).max() < 1e-6


MASK_SHAPES = [(3, 3, 21, 27), (21, 27), (1, 1, 1, 27), (21, 1), (3, 1, 21, 27)]


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("shape", MASK_SHAPES)
def test_masks(prog, kind, shape):
    run_case(prog, L_q=21, L_k=27, mask=kind, mask_shape=shape, seed=len(shape) + sum(shape))


def test_bool_mask_fully_masked_row(prog):
    def edit(x):
        x["mask"][0, 0, 3, :] = False
        x["mask"][2, 1, 16, :] = False

    fused, _, v = run_case(prog, dtype="float32", D=32, L_q=17, L_k=33, mask="bool", edit=edit, seed=12)
    np.testing.assert_allclose(fused[0, 0, 3], v[0, 0].mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(fused[2, 1, 16], v[2, 1].mean(axis=0), atol=1e-5)


def test_bool_mask_fully_masked_row_with_sinks_is_zero(prog):
    def edit(x):
        x["mask"][1, 2, 3, :] = False

    fused, _, _ = run_case(prog, L_q=17, L_k=33, mask="bool", sinks=True, edit=edit, seed=13)
    assert np.abs(fused[1, 2, 3]).max() == 0


def test_additive_mask_of_all_minus_inf_is_nan(prog):
    def edit(x):
        x["mask"][0, 1, 7, :] = -np.inf
        x["mask"][1, 0, 5, :20] = -np.inf

    fused, _, _ = run_case(prog, L_q=17, L_k=33, mask="additive", edit=edit, seed=14)
    assert np.isnan(fused[0, 1, 7]).all()
    assert np.isfinite(np.delete(fused[0, 1], 7, axis=0)).all()
    assert np.isfinite(fused[1, 0]).all()


def test_additive_finfo_min_row_is_the_mean_of_v(prog):
    def edit(x):
        x["mask"][0, 0, 2, :] = np.finfo(np.float32).min

    fused, _, v = run_case(prog, dtype="float32", D=32, L_q=17, L_k=33, mask="additive", edit=edit, seed=15)
    np.testing.assert_allclose(fused[0, 0, 2], v[0, 0].mean(axis=0), atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sinks(prog, dtype):
    run_case(prog, dtype=dtype, D=32, L_q=40, L_k=50, sinks=True, seed=16)


def test_sinks_with_bool_mask_and_gqa(prog):
    run_case(prog, H_q=4, H_kv=2, L_q=16, L_k=16, mask="bool", sinks=True, seed=17)


# ---------------------------------------------------------------------------
# Numerics, schedules


def test_large_logits_do_not_overflow_fp16(prog):
    def edit(x):
        x["q"] *= 60.0
        x["k"] *= 60.0

    fused, _, _ = run_case(prog, D=128, B=1, L_q=30, L_k=30, edit=edit, scale=1.0, seed=18)
    assert np.isfinite(fused).all()


def test_nan_propagates_to_its_row_and_column_only(prog):
    def edit(x):
        x["q"][0, 1, 4, 7] = np.nan
        x["v"][2, 2, 9, 3] = np.nan

    fused, _, _ = run_case(prog, dtype="float32", L_q=17, L_k=20, edit=edit, seed=19)
    assert np.isnan(fused[0, 1, 4]).all()
    assert np.isfinite(np.delete(fused[0, 1], 4, axis=0)).all()
    assert np.isnan(fused[2, 2, :, 3]).all()
    assert np.isfinite(np.delete(fused[2, 2], 3, axis=1)).all()
    assert np.isfinite(fused[1]).all()


def test_no_data_races(prog):
    """ThreadSanitizer with Metal's ordering: the one barrier orders every
    copy into threadgroup memory before every read of it."""
    run_case(prog, L_q=20, L_k=17, causal=True, race_check=True, seed=24)


@pytest.mark.parametrize("seed", [1, 2])
def test_adversarial_schedule(prog, seed):
    """Simdgroups and threadgroups far out of step: a missing barrier shows."""
    run_case(prog, dtype="float32", D=32, B=5, H_q=1, L_q=40, L_k=33, mask="bool", sinks=True,
             schedule=seed, seed=21)


# ---------------------------------------------------------------------------
# Kernel names and the JIT source


def test_host_kernel_names_match_the_instantiation_list(prog, tmp_path):
    """short_attention_kernel_name() with choose_short_attention_tiles()
    names exactly the kernels mlx_fused_attn/families/short_attention/short_attention.metal instantiates, and
    short_attention_covers() sends no call to a kernel that does not exist."""
    main = tmp_path / "names.cpp"
    main.write_text(
        '#include <cstdio>\n#include "mlx_fused_attn/families/short_attention/short_attention_kernel_name.h"\n'
        "int main() {\n"
        "  const fa::DType dtypes[] = {fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};\n"
        "  for (fa::DType t : dtypes)\n"
        "    for (int d = 1; d <= 256; ++d)\n"
        "      for (int lq = 1; lq <= 80; ++lq)\n"
        "        for (int lk = 1; lk <= 80; ++lk)\n"
        "          if (fa::short_attention_covers(lq, lk, d, d, t, fa::Backend::Metal))\n"
        '            std::printf("%s\\n", fa::short_attention_kernel_name(t, d,\n'
        "                fa::choose_short_attention_tiles(d, t, fa::Backend::Metal,\n"
        "                    fa::short_attention_seq(lq, lk))).c_str());\n"
        "}\n"
    )
    exe = tmp_path / "names"
    subprocess.run([emu.CXX, "-std=c++17", "-O1", "-I", emu.REPO_ROOT, str(main), "-o", str(exe)], check=True)
    host = set(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
    assert host == set(prog.kernels)


def test_flattened_jit_source_holds_every_kernel(prog):
    """The short family's JIT text holds every kernel of the source, and the
    one-kernel text the JIT compiles for a call computes exactly what the
    source does."""
    assert emu.instance_names(jit_text.write_family("short_attention")) == set(prog.kernels)
    want = ("bfloat16", "64", str(seq_for(40, 33)))
    (name,) = [n for n in prog.kernels if (m := KERNEL.match(n)) and m.groups()[:3] == want]
    jit = emu.load(jit_text.write_kernel("short_attention", name))
    assert set(jit.kernels) == {name}
    args = dict(dtype="bfloat16", D=64, H_q=4, H_kv=2, L_q=40, L_k=33, causal=True, sinks=True, seed=23)
    fused_aot, _, _ = run_case(prog, **args)
    fused_jit, _, _ = run_case(jit, **args)
    np.testing.assert_array_equal(fused_aot, fused_jit)
