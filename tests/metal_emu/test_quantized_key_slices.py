"""Key slices (mlx_fused_attn/kernels/key_slices.h, AttnTiles::key_slices)
in the Metal emulator: the quantized family's body with CUDA's key-slice
tiles, choose_quantized_sliced_tiles() (16 rows, 64-key blocks, 4 warps
that share the rows and each take 16 keys of every block), instantiated
for the test by tests/metal_emu/kernels/quantized_key_slices.metal, since
only CUDA's quantized decode builds them. Checked as
test_quantized_attention_kernel.py checks the family (its run_quant: the
float64 reference of dequantize-then-attend, inputs in their own layouts,
poisoned output and partials), with no classes by block, as CUDA's entry
point reads none.

Every case visits several key blocks a threadgroup and ends in a ragged
block whose trailing slices lie wholly past L_k (those slices skip the
block: only their merge sees them); between them: decode with GQA packed
as rows (a whole block of 16 and a quarter of one), split keys and the
combine, bool and additive masks (per head and shared by the heads),
causal rows (L_q > 1, the causal cut inside a block and rows that see no
key), sinks (slice 0 of split 0 counts them), and an adversarial schedule
and the race check for the merge's barriers (it reuses the K/V stage the
slices last read)."""

import pytest

from . import emu
from .test_quantized_attention_kernel import run_quant

METAL = "tests/metal_emu/kernels/quantized_key_slices.metal"
SUFFIX = "_ks4"
BK = 64  # choose_quantized_sliced_tiles().bk
SLICE_KEYS = BK // 4


@pytest.fixture(scope="module")
def prog():
    return emu.load(METAL)


def run_sliced(prog, **case):
    """One case of the key-slice kernel (no classes by block), returning
    its largest error."""
    return run_quant(prog, suffix=SUFFIX, mask_blocks=False, **case)


def test_the_instances_are_the_sliced_tiles(prog):
    names = [n for n in prog.kernels if n.startswith("fa_quantized_attention_")]
    assert names and all(n.endswith(f"_bq16_bk{BK}_wm4{SUFFIX}") for n in names)


def slices_past_the_keys(L_k):
    """Slices of the last block that lie wholly past L_k."""
    return 4 - -(-(L_k % BK) // SLICE_KEYS) if L_k % BK else 0


# Decode cases, each ending in a block with slices wholly past L_k.
DECODE = [
    # 32 query heads on 2: one whole block of 16 packed rows; 8 blocks in
    # 2 splits, the last of 5 keys.
    dict(dtype="float16", D=64, bits=4, group=32, B=1, H_q=32, H_kv=2, L_q=1, L_k=453, n_splits=2),
    # A quarter of a block's rows; one threadgroup over 6 blocks, the last
    # of 40 keys (slice 2 partly past L_k).
    dict(dtype="bfloat16", D=64, bits=8, group=64, B=2, H_q=8, H_kv=2, L_q=1, L_k=360),
    # D = 32, 3 splits of 2 blocks each, the last of 20 keys.
    dict(dtype="float16", D=32, bits=8, group=32, B=2, H_q=8, H_kv=2, L_q=1, L_k=340, n_splits=3),
]


@pytest.mark.parametrize("case", range(len(DECODE)))
def test_decode_with_gqa_packed(prog, case):
    c = DECODE[case]
    assert slices_past_the_keys(c["L_k"]) >= 1
    run_sliced(prog, packed=True, seed=100 + case, **c)


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("shared", [False, True])
def test_decode_with_array_masks(prog, kind, shared):
    """A mask per query head (packed with the rows) or shared by the heads
    (mlx-lm's batched-decoding padding mask, [B, 1, 1, L_k])."""
    B, H_q, L_k = 2, 8, 330
    shape = (B, 1, 1, L_k) if shared else (B, H_q, 1, L_k)
    run_sliced(prog, dtype="float16", D=64, bits=4, group=64, B=B, H_q=H_q, H_kv=2, L_q=1, L_k=L_k,
               mask=kind, mask_shape=shape, packed=True, n_splits=2, seed=110 + 2 * shared + (kind == "bool"))


def test_decode_with_sinks(prog):
    """Sinks, which the host never packs: slice 0 of split 0 counts them,
    with a padding mask."""
    run_sliced(prog, dtype="float16", D=64, bits=4, group=32, B=2, H_q=4, H_kv=2, L_q=1, L_k=301,
               sinks=True, mask="bool", mask_shape=(2, 1, 1, 301), n_splits=2, seed=120)


@pytest.mark.parametrize("n_splits", [1, 2])
def test_causal_rows(prog, n_splits):
    """14 causal rows on 300 keys: the cut runs through slices 1 and 2 of
    the last block (row i sees keys up to 286 + i), whose slice 3 lies
    past L_k; with sinks and GQA."""
    run_sliced(prog, dtype="float16", D=64, bits=4, group=32, H_q=4, H_kv=2, L_q=14, L_k=300,
               causal=True, sinks=True, n_splits=n_splits, seed=130 + n_splits)


def test_causal_rows_that_see_no_key(prog):
    """16 rows on 10 keys: rows 0 to 5 see none (MLX's uniform softmax over
    every key), and slices 1 to 3 of the one block lie past L_k."""
    run_sliced(prog, dtype="float16", D=32, bits=8, group=32, H_q=2, L_q=16, L_k=10, causal=True,
               seed=140)


def test_additive_mask_over_rows(prog):
    run_sliced(prog, dtype="bfloat16", D=64, bits=8, group=64, B=2, H_q=2, L_q=11, L_k=200,
               mask="additive", seed=150)


@pytest.mark.parametrize("schedule", [1, 2])
def test_adversarial_schedule(prog, schedule):
    """Simdgroups far apart: the merge writes the K/V stage that the other
    slices' last block was read from."""
    run_sliced(prog, dtype="float16", D=64, bits=4, group=32, H_q=8, H_kv=2, L_q=1, L_k=200, packed=True,
               n_splits=2, schedule=schedule, seed=160 + schedule)


def test_no_data_races(prog):
    """The slices' merge through the K/V stage, under the race check."""
    run_sliced(prog, dtype="float16", D=32, bits=8, group=32, H_q=8, H_kv=2, L_q=1, L_k=150, packed=True,
               n_splits=2, race_check=True, seed=170)
