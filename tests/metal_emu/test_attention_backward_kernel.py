"""mlx_fused_attn/families/attention_backward/attention_backward.metal run in the Metal emulator against the
float64 backward (backward_reference.py).

Each case binds buffers the way the Metal host does (the comment at the top
of the .metal file): q, k, v and the mask in the forward's strided layouts
with poisoned padding (cases.place_inputs), the forward's O and LSE (from
the reference, or from the general forward kernel of mlx_fused_attn/families/attention/attention.metal
with has_lse, checked against the reference first), D from the row-dot
kernel, then the dK/dV and dQ kernels; LSE and gradients are NaN-poisoned
first, so every element must be written.
"""

import re
import subprocess

import numpy as np
import pytest

from . import backward_reference, cases, emu
from .attn_bwd_params import AttnBwdParams
from .attn_params import AttnParams

METAL = "mlx_fused_attn/families/attention_backward/attention_backward.metal"
ROW_DOT = "mlx_fused_attn/families/attention_backward/attention_backward_row_dot.metal"
FORWARD = "mlx_fused_attn/families/attention/attention.metal"
DTYPES = ("float16", "bfloat16", "float32")
# FA_ATTENTION_BACKWARD_HEAD_DIMS (attention_backward_config.h).
HEAD_DIMS = (32, 64, 96, 128)
FC = {"has_mask": 300, "bool_mask": 301, "causal": 302, "has_sinks": 303, "has_lse": 305, "split_keys": 304, "mask_blocks": 306, "align_q": 200, "align_k": 201}
# Relative to the largest gradient element: P and dS are rounded to the
# input dtype before their products (as the forward rounds P).
TOL = {"float16": 1e-2, "bfloat16": 4e-2, "float32": 1e-4}


class Programs:
    def __init__(self):
        self.grads = emu.load(METAL)
        self.row_dot = emu.load(ROW_DOT)
        self.forward = emu.load(FORWARD)


def run_forward(prog, params, inputs, constants, dtype, D, launch):
    """The general forward kernel with has_lse on the placed inputs:
    (O in the dtype, its float64 values, the LSE)."""
    p = AttnParams.from_buffer_copy(params)
    B, H_q, L_q, L_k = p.B, p.H_q, p.L_q, p.L_k
    pat = re.compile(rf"fa_attention_{dtype}_d{D}_dv{D}_bq(\d+)_bk(\d+)_wm(\d+)$")
    ((name, bq, bk, warps),) = [(n, *map(int, m.groups())) for n in prog.kernels for m in [pat.match(n)] if m]
    out, p.o_strides = contiguous((B, H_q, L_q, D), dtype)
    buffers = {**{i: x for i, x in inputs.items() if i != 3}, 3: out, 4: p, 10: np.full((B, H_q, L_q), np.nan, np.float32)}
    fc = {index: constants.get(index, False) for index in prog.constants}
    fc.update({FC["has_lse"]: True, FC["has_sinks"]: 6 in inputs, FC["mask_blocks"]: False, FC["align_q"]: L_q % bq == 0, FC["align_k"]: L_k % bk == 0})
    res = prog.launch(name, buffers=buffers, constants=fc, grid=(-(-L_q // bq), H_q, B), threadgroup=(32, warps, 1), **launch)
    return res[3], cases.from_device(res[3], dtype), res[10]


@pytest.fixture(scope="module")
def prog():
    return Programs()


def kernel_for(prog, kind, dtype, D):
    """(host name, bq, bk, warps) of the dkdv or dq kernel."""
    pat = re.compile(rf"fa_attention_bwd_{kind}_{dtype}_d{D}_bq(\d+)_bk(\d+)_wm(\d+)$")
    found = [(n, *map(int, m.groups())) for n in prog.kernels for m in [pat.match(n)] if m]
    assert len(found) == 1, f"{kind} {dtype} d{D}: kernels {found}"
    return found[0]


def contiguous(shape, dtype):
    """A NaN-poisoned gradient buffer and its [B, H, L] strides."""
    buf = np.full(shape, cases.poison(dtype))
    return buf, tuple(s // buf.itemsize for s in buf.strides[:3])


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
    forward="reference",
    lists=True,
    device_kv_edit=None,
):
    """One case, checked; edit(inputs) may change the float32 inputs (a
    dict) first, device_kv_edit the placed K and V (cases.place_inputs).
    forward: where O and the LSE come from, "reference" or "kernel". lists:
    whether the kernels read the mask's block lists where the host would
    bind them (a mask every head of a GQA group shares)."""
    H_kv = H_kv or H_q
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(D)
    inputs = {
        "q": rng.standard_normal((B, H_q, L_q, D)).astype(np.float32),
        "k": rng.standard_normal((B, H_kv, L_k, D)).astype(np.float32),
        "v": rng.standard_normal((B, H_kv, L_k, D)).astype(np.float32),
        "sinks": rng.standard_normal(H_q).astype(np.float32) if sinks else None,
    }
    if mask == "bool":
        inputs["mask"] = rng.random(mask_shape or (B, H_q, L_q, L_k)) < 0.7
    elif mask == "additive":
        inputs["mask"] = rng.standard_normal(mask_shape or (B, H_q, L_q, L_k)).astype(np.float32)
    if edit is not None:
        edit(inputs)
    buffers, strides, ref_kwargs, _, (q64, k64, v64) = cases.place_inputs(
        inputs, dtype, layout, None, mask, device_kv_edit=device_kv_edit
    )
    do_dev, do64 = cases.to_device(rng.standard_normal((B, H_q, L_q, D)), dtype)
    ref = backward_reference.backward(q64, k64, v64, do64, scale, dtype, causal=causal, **ref_kwargs)
    o_dev, o64 = cases.to_device(ref["o"], dtype)
    lse = ref["lse"].astype(np.float32)
    what = f"{dtype} D={D} B={B} H_q={H_q} H_kv={H_kv} L_q={L_q} L_k={L_k} causal={causal} mask={mask} sinks={sinks} layout={layout} seed={seed} schedule={schedule}"

    row_strides = (H_q * L_q * D, L_q * D, D)
    params = AttnBwdParams(
        fwd=AttnParams(
            B=B, H_q=H_q, H_kv=H_kv, gqa_factor=H_q // H_kv, L_q=L_q, L_k=L_k, D=D, D_v=D,
            causal_offset=L_k - L_q, scale_log2=scale * np.log2(np.e),
            q_strides=strides["q"][:3], k_strides=strides["k"][:3], v_strides=strides["v"][:3],
            o_strides=row_strides, mask_strides=strides["mask"],
        ),
        do_strides=row_strides,
    )
    dq, params.dq_strides = contiguous((B, H_q, L_q, D), dtype)
    dk, params.dk_strides = contiguous((B, H_kv, L_k, D), dtype)
    dv, params.dv_strides = contiguous((B, H_kv, L_k, D), dtype)
    dkdv_name, dkdv_bq, dkdv_bk, dkdv_warps = kernel_for(prog.grads, "dkdv", dtype, D)
    dq_name, dq_bq, dq_bk, dq_warps = kernel_for(prog.grads, "dq", dtype, D)
    shared = mask is not None and (H_q == H_kv or np.shape(inputs["mask"])[-3] == 1)
    block_lists = None
    if lists and shared:
        tiles = (dkdv_bq, dkdv_bk, dq_bq, dq_bk)
        values = ref_kwargs["bool_mask" if mask == "bool" else "add_mask"]
        block_lists = cases.backward_mask_lists(values, mask, L_q, L_k, *tiles)
        sb = [s // 4 if n > 1 else 0 for s, n in zip(block_lists.strides[:2], block_lists.shape[:2])]
        params.list_strides = tuple(sb)
        dkdv_row, _, dq_start, dq_row, _, _ = cases.backward_list_rows(mask, L_q, L_k, *tiles)
        params.dkdv_list_row, params.dq_lists_start, params.dq_list_row = dkdv_row, dq_start, dq_row
    features = {
        FC["has_mask"]: mask is not None, FC["bool_mask"]: mask == "bool", FC["causal"]: causal,
        FC["mask_blocks"]: block_lists is not None,
    }
    constants = {index: features.get(index, False) for index in prog.grads.constants}
    launch = dict(schedule=schedule, race_check=race_check)
    if forward == "kernel":
        o_dev, o64, lse = run_forward(prog.forward, params.fwd, buffers, constants, dtype, D, launch)
        np.testing.assert_allclose(lse, ref["lse"], rtol=1e-5, atol=1e-5, err_msg=f"LSE: {what}")

    # D = rowsum(dO * O), a warp a row.
    warps = 4
    res = prog.row_dot.launch(
        f"fa_attention_bwd_row_dot_{dtype}",
        buffers={0: o_dev, 1: do_dev, 2: np.full((B, H_q, L_q), np.nan, np.float32), 3: params},
        grid=(-(-L_q // warps), H_q, B), threadgroup=(32, warps, 1), **launch,
    )
    d = res[2]
    np.testing.assert_allclose(d, (o64 * do64).sum(-1), rtol=1e-5, atol=1e-5, err_msg=f"D: {what}")

    common = {0: buffers[0], 1: buffers[1], 2: buffers[2], 3: do_dev, 4: lse, 5: d, 8: params}
    if mask is not None:
        common[9] = buffers[5]
    if block_lists is not None:
        common[10] = block_lists
    res = prog.grads.launch(
        dkdv_name,
        buffers={**common, 6: dk, 7: dv},
        constants={**constants, FC["align_q"]: L_q % dkdv_bk == 0, FC["align_k"]: L_k % dkdv_bq == 0},
        grid=(-(-L_k // dkdv_bq), H_kv, B), threadgroup=(32, dkdv_warps, 1), **launch,
    )
    got = {"dk": res[6], "dv": res[7]}
    res = prog.grads.launch(
        dq_name,
        buffers={**common, 6: dq},
        constants={**constants, FC["align_q"]: L_q % dq_bq == 0, FC["align_k"]: L_k % dq_bk == 0},
        grid=(-(-L_q // dq_bq), H_q, B), threadgroup=(32, dq_warps, 1), **launch,
    )
    got["dq"] = res[6]
    for grad, value in got.items():
        fused = cases.from_device(value, dtype)
        want = ref[grad]
        tol = TOL[dtype] * max(np.abs(want).max(), 1e-6)
        np.testing.assert_allclose(fused, want, atol=tol, rtol=TOL[dtype], err_msg=f"{grad}: {what}")
    return got


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_ragged(prog, dtype):
    run_case(prog, dtype=dtype, D=64, L_q=33, L_k=65)


@pytest.mark.parametrize("D", HEAD_DIMS)
def test_every_head_dim(prog, D):
    run_case(prog, dtype="float16", D=D, L_q=40, L_k=37, seed=D)


@pytest.mark.parametrize("L_q, L_k", [(33, 65), (65, 33), (64, 64)])
def test_causal(prog, L_q, L_k):
    """Bottom-right causal, L_q above and below L_k: rows that see no key
    (L_q > L_k) average V and give no dS."""
    run_case(prog, dtype="float32", D=32, L_q=L_q, L_k=L_k, causal=True)


@pytest.mark.parametrize("mask", ["bool", "additive"])
def test_array_masks_broadcast(prog, mask):
    run_case(prog, dtype="float32", D=32, B=2, H_q=2, L_q=20, L_k=70, mask=mask, mask_shape=(1, 2, 20, 70))


def test_bool_mask_hiding_whole_rows(prog):
    """Rows that see no key: LSE -inf, P = 1 / L_k (dV only), dS = 0."""

    def hide_rows(inputs):
        inputs["mask"][0, 0, [2, 5]] = False

    run_case(prog, dtype="float32", D=32, H_q=1, L_q=9, L_k=40, mask="bool", edit=hide_rows)


@pytest.mark.parametrize("lists", [True, False], ids=["lists", "every_block"])
def test_block_lists_skip_keys_the_mask_hides_from_every_row(prog, lists):
    """A key-padding mask [B, 1, 1, L_k] hiding batch entry 1's first 64
    keys, whose K and V are NaN on the device: with the block lists neither
    kernel reads them, and the gradients are the clean reference's; reading
    every block, their products make dQ NaN."""

    def pad(inputs):
        inputs["mask"] = np.broadcast_to(np.arange(130) >= np.array([0, 64])[:, None, None, None], (2, 1, 1, 130))

    def poison_padding(name, dev):
        dev = dev.copy()
        dev[1, :, :64] = np.nan
        return dev

    if lists:
        run_case(prog, dtype="float16", D=32, B=2, H_q=4, H_kv=2, L_q=70, L_k=130, mask="bool",
                 mask_shape=(2, 1, 1, 130), edit=pad, device_kv_edit=poison_padding)
    else:
        with pytest.raises(AssertionError, match="dq"):
            run_case(prog, dtype="float16", D=32, B=2, H_q=4, H_kv=2, L_q=70, L_k=130, mask="bool",
                     mask_shape=(2, 1, 1, 130), edit=pad, device_kv_edit=poison_padding, lists=False)


@pytest.mark.parametrize("mask", ["bool", "additive"])
def test_block_lists_of_a_sliding_window(prog, mask):
    """A causal window of 40 keys over 150: hidden, shown and cut blocks in
    both kernels' lists, GQA sharing the mask; the additive window hides
    with -inf."""

    def window(inputs):
        i, j = np.arange(150)[:, None], np.arange(150)[None]
        shown = (j <= i) & (j > i - 40)
        inputs["mask"] = shown[None, None] if mask == "bool" else np.where(shown, 0.0, -np.inf)[None, None]

    run_case(prog, dtype="float32", D=32, B=1, H_q=2, H_kv=1, L_q=150, L_k=150, mask=mask,
             mask_shape=(1, 1, 150, 150), edit=window)


@pytest.mark.parametrize("mask", ["bool", "additive"])
@pytest.mark.parametrize("lists", [True, False], ids=["lists", "every_block"])
def test_random_masks_over_whole_blocks(prog, mask, lists):
    """A random mask over whole blocks of both kernels (64 queries, 128
    keys): every block mixes shown and hidden scores, so that a bool mask's
    blocks read its shown bits (with the lists) or its bytes, an additive
    mask's its values, through the masked op's whole-block form; a row the
    bool mask hides everywhere."""

    def hide_row(inputs):
        if mask == "bool":
            inputs["mask"][..., 3, :] = False

    run_case(prog, dtype="float16", D=32, H_q=2, L_q=64, L_k=128, mask=mask, mask_shape=(1, 1, 64, 128),
             edit=hide_row, lists=lists)


def test_gqa_sums_over_the_group(prog):
    run_case(prog, dtype="float16", D=64, B=2, H_q=6, H_kv=2, L_q=70, L_k=33, causal=True)


def test_sinks(prog):
    run_case(prog, dtype="float32", D=32, H_q=3, L_q=17, L_k=50, sinks=True, causal=True)


def test_strided_inputs(prog):
    run_case(prog, dtype="bfloat16", D=32, B=2, H_q=2, L_q=31, L_k=45, layout="blhd", mask="bool")


@pytest.mark.parametrize("seed", [1, 2])
def test_adversarial_schedules(prog, seed):
    run_case(prog, dtype="float16", D=32, H_q=2, H_kv=1, L_q=70, L_k=70, causal=True, schedule=seed)


def test_no_races(prog):
    run_case(prog, dtype="float16", D=32, H_q=2, H_kv=1, L_q=40, L_k=70, mask="additive", race_check=True)


@pytest.mark.parametrize(
    "case",
    [
        dict(dtype="float32", D=32, L_q=65, L_k=33, causal=True),
        dict(dtype="float32", D=32, L_q=33, L_k=65, causal=True, sinks=True),
        dict(dtype="float16", D=64, H_q=4, H_kv=2, L_q=40, L_k=70, mask="bool"),
        dict(dtype="bfloat16", D=32, L_q=17, L_k=50, mask="additive"),
    ],
    ids=["causal_no_key_rows", "causal_sinks", "bool_gqa", "additive"],
)
def test_forward_lse_feeds_the_backward(prog, case):
    """The general forward kernel's LSE (has_lse) matches the reference and,
    with its O, gives the reference's gradients."""
    run_case(prog, forward="kernel", **case)


def test_host_kernel_names_match_the_instantiation_lists(prog, tmp_path):
    """attention_backward_kernel_name() and attention_backward_row_dot_name()
    with choose_attention_backward_tiles() name exactly the kernels the two
    .metal files instantiate."""
    main = tmp_path / "names.cpp"
    main.write_text(
        '#include <cstdio>\n#include "mlx_fused_attn/families/attention_backward/attention_backward_kernel_name.h"\n'
        "int main() {\n"
        "  const fa::DType dtypes[] = {fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};\n"
        "  for (fa::DType t : dtypes) {\n"
        '    std::printf("%s\\n", fa::attention_backward_row_dot_name(t).c_str());\n'
        "    for (int d = 1; d <= 256; ++d)\n"
        "      if (fa::attention_backward_head_dims_supported(d, d))\n"
        "        for (fa::BwdKernel k : {fa::BwdKernel::DkDv, fa::BwdKernel::Dq})\n"
        '          std::printf("%s\\n", fa::attention_backward_kernel_name(k, t, d,\n'
        "              fa::choose_attention_backward_tiles(d, t, fa::Backend::Metal).of(k)).c_str());\n"
        "  }\n"
        "}\n"
    )
    exe = tmp_path / "names"
    subprocess.run([emu.CXX, "-std=c++17", "-I", emu.REPO_ROOT, str(main), "-o", str(exe)], check=True)
    host = set(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split())
    assert host == set(prog.grads.kernels) | set(prog.row_dot.kernels)
    assert len(host) == len(DTYPES) * (1 + 2 * len(HEAD_DIMS))
