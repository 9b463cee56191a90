"""The tests of MLX's kernels in the emulator (test_mlx_kernels.py) check
the emulator: with a fault planted in the emulator's model of a Metal
primitive (include/metal_emu/plant.h), MLX's kernels, right on Apple GPUs,
compute wrong results here. Each test builds the named kernel with one
plant and requires a mismatch with the float64 reference; its id says
which plant and which kernel."""

import pytest

from .test_mlx_kernels import (
    SDPA_VECTOR,
    run_steel_attention,
    test_sdpa_vector_matches_reference as sdpa_vector,
    test_sdpa_vector_two_pass_matches_reference as sdpa_vector_two_pass,
)

PLANTS = {
    "fragment_layout": "FA_EMU_PLANT=1",
    "shuffle_xor_lanes": "FA_EMU_PLANT=2",
    "barrier_no_wait": "FA_EMU_PLANT=3",
}
MISMATCH = "Not equal to tolerance"


def steel_attention(define):
    # Two query blocks, three key blocks (the last partial), grouped queries.
    run_steel_attention("float16", 64, defines=(define,), B=1, H_q=2, H_kv=1, L_q=40, L_k=80, seed=7)


def steel_attention_split_head(define):
    # Two simdgroups across the head dimension, exchanging scores.
    run_steel_attention("bfloat16", 128, defines=(define,), B=1, H_q=1, L_q=33, L_k=47, seed=8)


def decode(define):
    sdpa_vector(*SDPA_VECTOR[0], (2, 2, 1, 3, 127), defines=(define,))


def decode_two_pass(define):
    sdpa_vector_two_pass(*SDPA_VECTOR[0], (2, 2, 1, 3, 127), defines=(define,))


KERNELS = {
    "steel_attention": steel_attention,
    "steel_attention_split_head": steel_attention_split_head,
    "sdpa_vector": decode,
    "sdpa_vector_two_pass": decode_two_pass,
}
# Each plant with the kernels that use the primitive it breaks: the vector
# kernels use no simdgroup matrix and no simd_shuffle_xor (their reductions
# are simd_sum and simd_max), so only the barrier plant reaches them.
CASES = [
    (plant, kernel)
    for plant in PLANTS
    for kernel in KERNELS
    if plant == "barrier_no_wait" or kernel.startswith("steel")
]


@pytest.mark.parametrize("plant,kernel", CASES, ids=[f"{p}-fails-{k}" for p, k in CASES])
def test_planted_fault_fails_mlx_kernel(plant, kernel):
    with pytest.raises(AssertionError, match=MISMATCH):
        KERNELS[kernel](PLANTS[plant])
