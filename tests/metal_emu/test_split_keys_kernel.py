"""Split keys (mlx_fused_attn/kernels/split_keys.h) on Metal in the emulator:
mlx_fused_attn/families/attention/attention.metal's kernel with split_keys, each threadgroup one split of
a query block's keys, then fa_split_combine merging the partials; checked
against the float64 reference, with the partials and the output poisoned.
Covers several split counts, a ragged last split, splits a causal query
block never reaches, masks (whose classes by block the splits share), sinks
and decode with GQA packed as the host packs it (attention_planner.cpp: the
query heads sharing a KV head as rows)."""

import numpy as np
import pytest

from . import cases, emu
from .attn_params import AttnParams
from .test_attention_kernel import FC, HIDDEN, METAL, SHOWN, TWO, VALUES, block_classes, kernel_for

SPLIT_KEYS = 304
SPLIT_FC = {**FC, "split_keys": SPLIT_KEYS}


@pytest.fixture(scope="module")
def prog():
    return emu.load(METAL)


def pack_gqa(p):
    """The host's packing of a decode call (L_q = 1): H_kv heads of
    gqa_factor query rows, a head's stride the row stride."""
    g = p.gqa_factor
    assert p.L_q == 1
    packed = AttnParams.from_buffer_copy(bytes(p))
    packed.H_q, packed.L_q, packed.gqa_factor = p.H_kv, g, 1
    for name in ("q_strides", "o_strides"):
        s = getattr(p, name)
        getattr(packed, name)[:] = [s[0], s[1] * g, s[1]]
    m = p.mask_strides
    packed.mask_strides[:] = [m[0], m[1] * g, m[1], m[3]]
    return packed


def run_split(prog, n_splits, *, dtype="float16", D=64, B=1, H_q=2, L_q=1, L_k=200, packed=False, checks=None,
              suffix="", bk=None, constants=None, **case):
    """One case through the split kernel and the combine. checks(o_part,
    row_max, row_sum, params) may look at the partials (each n_splits rows
    of [B, H, L]). suffix, bk: the kernel (kernel_for); constants: function
    constants besides the features."""
    name, bq, bk, warps = kernel_for(prog, dtype, D, D, suffix, bk)

    def dispatch(buffers, constants, schedule, race_check):
        p = pack_gqa(buffers[4]) if packed else buffers[4]
        buffers[4] = p
        rows = p.B * p.H_q * p.L_q
        o_part = np.full((n_splits, rows, D), np.nan, np.float32)
        stats = np.full((2, n_splits, rows), np.nan, np.float32)
        res = prog.launch(
            name,
            buffers={**buffers, 7: o_part, 8: stats, 9: np.array([n_splits], np.int32)},
            constants={
                **constants,
                SPLIT_KEYS: True,
                FC["align_q"]: p.L_q % bq == 0,
                FC["align_k"]: p.L_k % bk == 0,
                # The host never packs a causal decode: at L_q = 1 it masks nothing.
                FC["causal"]: constants[FC["causal"]] and not packed,
            },
            grid=(-(-p.L_q // bq) * n_splits, p.H_q, p.B),
            threadgroup=(32, warps, 1),
            schedule=schedule,
            race_check=race_check,
        )
        assert not np.isnan(res[7]).any() and not np.isnan(res[8]).any(), "a partial row was not written"
        if checks is not None:
            checks(res[7], res[8][0], res[8][1], p)
        combined = prog.launch(
            f"fa_split_combine_{dtype}",
            buffers={3: buffers[3], 4: p, 7: res[7], 8: res[8], 9: np.array([n_splits], np.int32)},
            constants=constants,
            grid=(-(-p.L_q * D // 96), p.H_q, p.B),
            threadgroup=(96, 1, 1),
            schedule=schedule,
            race_check=race_check,
        )
        return {3: combined[3]}

    # The host binds a mask's classes by block, to packed GQA only where the
    # heads share the mask (a mask of one head: mask_shared_by_heads), then
    # for the packed rows, the heads of one query.
    shape = case.get("mask_shape")
    heads_share = shape is not None and (len(shape) < 3 or shape[-3] == 1)
    launch = cases.Launch(name, grid=None, warps=warps, constants=constants or {},
                          visit_tiles=(bq, bk) if heads_share or not packed else None,
                          visit_rows=H_q // case.get("H_kv", H_q) if packed else None)
    return cases.run_case(
        prog, launch, SPLIT_FC, dtype=dtype, D=D, D_v=D, B=B, H_q=H_q, L_q=L_q, L_k=L_k, dispatch=dispatch,
        **case
    )


@pytest.mark.parametrize("n_splits", [1, 2, 3, 7])
@pytest.mark.parametrize("L_k", [64, 200, 1000])
def test_split_counts_and_ragged_last_split(prog, n_splits, L_k):
    run_split(prog, n_splits, L_k=L_k, B=2, H_q=2, seed=n_splits + L_k)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("D", [64, 128])
def test_dtypes_and_head_dims(prog, dtype, D):
    run_split(prog, 4, dtype=dtype, D=D, L_q=33, L_k=300, H_q=2, seed=D)


def test_more_splits_than_key_blocks(prog):
    # 65 keys are 3 blocks: splits 3 to 7 visit none and must add nothing.
    def empty_splits_add_nothing(o_part, row_max, row_sum, p):
        assert (row_sum[3:] == 0).all() and (o_part[3:] == 0).all()

    run_split(prog, 8, L_k=65, H_q=2, checks=empty_splits_add_nothing)


@pytest.mark.parametrize("L_q", [1, 40, 97])
def test_causal(prog, L_q):
    # Early query blocks see fewer keys, so their last splits are empty.
    run_split(prog, 5, L_q=L_q, L_k=300, causal=True, seed=L_q)


def test_combine_takes_the_max_over_the_splits_maxima_only(prog):
    """Equal scores (q = 0): each split's row max is 0 and its sum the 512
    keys it visits. The combine weighs a split by exp2(its max - the max
    over splits); a sum taken into that max (stats holds the sums after the
    maxima) would make every weight exp2(-512) = 0 and the rows NaN."""

    def zero_q(x):
        x["q"][:] = 0

    run_split(prog, 2, L_q=4, L_k=1024, edit=zero_q)

def test_causal_rows_before_every_key_are_the_mean_of_v(prog):
    run_split(prog, 3, L_q=100, L_k=40, causal=True)


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("mask_shape", [None, (1, 1, 33, 300)])
def test_masks(prog, kind, mask_shape):
    run_split(prog, 4, L_q=33, L_k=300, B=2, H_q=2, mask=kind, mask_shape=mask_shape)


def test_split_whose_keys_are_all_masked_adds_nothing(prog):
    def mask_the_middle(x):
        x["mask"][..., 64:192] = False

    run_split(prog, 4, L_q=8, L_k=256, mask="bool", edit=mask_the_middle)


def test_fully_masked_rows_are_the_mean_of_v(prog):
    def mask_all(x):
        x["mask"][:] = False

    run_split(prog, 3, L_q=8, L_k=200, mask="bool", edit=mask_all)


@pytest.mark.parametrize("mask", [None, "bool"])
def test_sinks_are_counted_once(prog, mask):
    run_split(prog, 5, L_q=20, L_k=400, H_q=4, H_kv=2, sinks=True, mask=mask)


@pytest.mark.parametrize("H_q,H_kv", [(8, 2), (4, 1), (6, 3)])
@pytest.mark.parametrize("n_splits", [1, 6])
def test_decode_with_gqa_packed(prog, H_q, H_kv, n_splits):
    run_split(prog, n_splits, L_q=1, L_k=500, B=2, H_q=H_q, H_kv=H_kv, packed=True)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_decode_with_gqa_packed_and_a_per_head_mask(prog, kind):
    run_split(prog, 3, L_q=1, L_k=300, B=2, H_q=8, H_kv=2, packed=True, mask=kind, causal=True)


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("n_splits", [1, 3])
def test_decode_with_gqa_packed_reads_a_mask_shared_by_heads_by_block(prog, kind, n_splits):
    """A mask [B, 1, 1, L_k] (mlx-lm's padding masks in batched decoding):
    the packed rows, the heads of one query, share its classes by block, so
    shown blocks read no mask, two-valued ones only their bits and hidden
    ones are never visited (block_classes poisons each), per batch entry."""
    _, bq, bk, _ = kernel_for(prog, "float16", 64, 64)
    classes = [HIDDEN, SHOWN, TWO, VALUES, SHOWN, HIDDEN, TWO]
    L_k = len(classes) * bk - 9
    edit, device_edit = block_classes(kind, lambda b, qb, kb: classes[(kb + 2 * b) % len(classes)], bq, bk)
    run_split(prog, n_splits, L_q=1, L_k=L_k, B=2, H_q=8, H_kv=2, packed=True, mask=kind,
              mask_shape=(2, 1, 1, L_k), edit=edit, device_mask_edit=device_edit, seed=60 + n_splits)


def test_no_data_races(prog):
    run_split(prog, 3, L_q=40, L_k=200, H_q=2, causal=True, race_check=True)


@pytest.mark.parametrize("seed", [1, 2])
def test_adversarial_schedule(prog, seed):
    run_split(prog, 4, L_q=1, L_k=300, H_q=4, H_kv=2, packed=True, schedule=seed)


@pytest.mark.parametrize("n_splits", [2, 3, 5])
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_splits_share_the_visits(prog, n_splits, kind):
    """The splits divide a query block's visits, hidden blocks skipped: a
    mask that lies in every shown, hidden and two-valued block (block_classes)
    shows that each split reads none of them and visits no hidden one, and
    a split whose visits are all two-valued or all shown still adds its
    share."""
    _, bq, bk, _ = kernel_for(prog, "float16", 64, 64)
    classes = [SHOWN, HIDDEN, TWO, HIDDEN, VALUES, SHOWN, TWO, HIDDEN]
    L_k = len(classes) * bk - 5
    edit, device_edit = block_classes(kind, lambda h, qb, kb: classes[(kb + qb) % len(classes)], bq, bk)
    run_split(prog, n_splits, L_q=bq + 3, L_k=L_k, H_q=2, mask=kind, mask_shape=(bq + 3, L_k), edit=edit,
              device_mask_edit=device_edit, seed=50 + n_splits)
