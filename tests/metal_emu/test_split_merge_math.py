"""The merge of split keys that CUDA's last split runs
(kernels/cuda/split_merge.cuh), in the emulator through
tests/metal_emu/kernels/split_merge_math.metal: four output elements a
thread (split_combine_elements) and each row's log-sum-exp
(split_combine_lse); and the combine kernel's threadgroup a row
(split_combine_row: its simdgroups over the splits in batches, its lanes
over the columns, 128 at a time); each against a float64 merge of the same
partials, with
splits that saw no key (sum 0), splits whose keys were all masked (the
masked score as their max), rows masked in every split (LSE -inf) and a
ragged last pass of elements; the output poisoned first."""

import numpy as np
import pytest

from . import emu
from .attn_params import AttnParams

MASKED = np.float32(-0.5 * np.finfo(np.float32).max)  # MaskedScore (attention_masks.h)


@pytest.fixture(scope="module")
def prog():
    return emu.load("tests/metal_emu/kernels/split_merge_math.metal")


def params(B, H, L, D):
    p = AttnParams()
    p.B, p.H_q, p.H_kv, p.gqa_factor, p.L_q, p.L_k, p.D, p.D_v = B, H, H, 1, L, 1, D, D
    p.o_strides[:] = [H * L * D, L * D, D]
    return p


def partials(rng, n_splits, rows, L, D):
    """Maxima, sums and outputs of n_splits splits of `rows` rows, L a (head,
    batch): split 1 saw no key, split 2 only masked ones, each (head,
    batch)'s row 0 only masked keys anywhere."""
    row_max = rng.normal(size=(n_splits, rows)).astype(np.float32) * 4
    row_sum = rng.uniform(0.5, 30.0, size=(n_splits, rows)).astype(np.float32)
    o_part = rng.normal(size=(n_splits, rows, D)).astype(np.float32)
    row_max[1], row_sum[1], o_part[1] = -np.finfo(np.float32).max, 0.0, 0.0
    row_max[2] = MASKED
    row_max[:, ::L] = np.where(row_sum[:, ::L] > 0, MASKED, row_max[:, ::L])
    return row_max, row_sum, o_part


def merged64(row_max, row_sum, o_part):
    m = row_max.astype(np.float64).max(axis=0)
    w = row_sum * np.exp2(row_max.astype(np.float64) - m)
    out = (w[..., None] * o_part).sum(axis=0) / w.sum(axis=0)[..., None]
    lse = np.where(m == MASKED, -np.inf, (m + np.log2(w.sum(axis=0))) * np.log(2.0))
    return out, lse


def merge_buffers(row_max, row_sum, o_part, B, H, L, D):
    """The merge kernels' buffers 0-4: partials, statistics, the output
    poisoned, the parameters and the split count."""
    return {
        0: o_part,
        1: np.concatenate([row_max, row_sum]),
        2: np.full(B * H * L * D, np.nan, np.float32),
        3: params(B, H, L, D),
        4: np.array([len(row_max)], np.int32),
    }


@pytest.mark.parametrize("n_splits,L,D,threads", [(3, 4, 64, 32), (7, 5, 128, 96), (32, 4, 128, 128)])
def test_four_elements_a_thread_and_the_lse_match_a_float64_merge(prog, n_splits, L, D, threads):
    B, H = 2, 3
    rng = np.random.default_rng(n_splits * L)
    rows = B * H * L
    row_max, row_sum, o_part = partials(rng, n_splits, rows, L, D)
    res = prog.launch(
        "merge_four_elements_a_thread",
        buffers={
            **merge_buffers(row_max, row_sum, o_part, B, H, L, D),
            5: np.full(rows, np.nan, np.float32),
        },
        grid=(1, H, B),
        threadgroup=(threads, 1, 1),
    )
    out, lse = merged64(row_max, row_sum, o_part)
    np.testing.assert_allclose(res[2].reshape(rows, D), out, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.isneginf(res[5]), np.isneginf(lse))
    assert np.isneginf(lse.reshape(B, H, L)[:, :, 0]).all()
    ok = np.isfinite(lse)
    np.testing.assert_allclose(res[5][ok], lse[ok], rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize(
    "n_splits,L,D",
    # Fewer splits than simdgroups; a batch past the last split; two passes
    # of 128 columns; columns past D_v in a lane's four.
    [(3, 2, 64), (37, 2, 256), (32, 3, 128), (9, 2, 80)],
)
def test_a_row_a_threadgroup_matches_a_float64_merge(prog, n_splits, L, D):
    B, H = 2, 2
    rng = np.random.default_rng(7 * n_splits + D)
    rows = B * H * L
    row_max, row_sum, o_part = partials(rng, n_splits, rows, L, D)
    res = prog.launch(
        "merge_a_row_a_threadgroup",
        buffers=merge_buffers(row_max, row_sum, o_part, B, H, L, D),
        grid=(L, H, B),
        threadgroup=(256, 1, 1),
    )
    out, _ = merged64(row_max, row_sum, o_part)
    np.testing.assert_allclose(res[2].reshape(rows, D), out, rtol=1e-5, atol=1e-6)
