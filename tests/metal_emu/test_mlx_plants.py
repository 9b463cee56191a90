"""The tests of MLX's kernels in the emulator (test_mlx_kernels.py,
test_mlx_gemm.py, test_mlx_softmax.py, test_mlx_reduce.py) check the
emulator: with a fault planted in the emulator's model of a Metal primitive
(include/metal_emu/plant.h), MLX's kernels, right on Apple GPUs, compute
wrong results here. Each test builds the named kernel with one plant and
requires a mismatch with the float64 reference; its id says which plant and
which kernel."""

import numpy as np
import pytest

from . import forward_error
from .test_mlx_gemm import INSTANCES as GEMM_INSTANCES
from .test_mlx_gemm import run_gemm
from .test_mlx_kernels import (
    SDPA_VECTOR,
    run_steel_attention,
    test_sdpa_vector_matches_reference as sdpa_vector,
    test_sdpa_vector_two_pass_matches_reference as sdpa_vector_two_pass,
)
from .test_mlx_reduce import and_case, sum_case
from .test_mlx_softmax import run_softmax

PLANTS = {
    "fragment_layout": "FA_EMU_PLANT=1",
    "shuffle_xor_lanes": "FA_EMU_PLANT=2",
    "barrier_no_wait": "FA_EMU_PLANT=3",
    "reduction_drops_lane": "FA_EMU_PLANT=4",
}
MISMATCH = forward_error.MISMATCH


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


def gemm(inst):
    def run(define):
        # Two tiles each way, the last partial, and a partial last K block;
        # an adversarial schedule, under which the simdgroups drift apart
        # (round robin keeps the float GEMM's two in step, barriers or not).
        got, ref, bound = run_gemm(inst, 1, 65, 33, 40, seed=3, defines=(define,), schedule=1)
        forward_error.check(got, ref, bound, f"GEMM {inst}")

    return run


def softmax(axis):
    def run(define):
        got, ref, bound = run_softmax("float16", False, axis, seed=1, defines=(define,))
        forward_error.check(got, ref, bound, f"softmax of rows of {axis}")

    return run


def all_reduce_sum(define):
    # 1000 elements: one threadgroup of 256 threads, eight simdgroups.
    got, ref = sum_case(1000, seed=1, defines=(define,))
    forward_error.check(got, ref, np.zeros(1), "all_reduce_sumfloat16")


def all_reduce_and(define):
    # The one zero in the last lane of the last simdgroup.
    got, ref = and_case(4096, 4095, defines=(define,))
    forward_error.check(got, ref, np.zeros(1), "all_reduce_andfloat32")


KERNELS = {
    "steel_attention": steel_attention,
    "steel_attention_split_head": steel_attention_split_head,
    "sdpa_vector": decode,
    "sdpa_vector_two_pass": decode_two_pass,
    "steel_gemm_nn_half": gemm(GEMM_INSTANCES[0]),
    "steel_gemm_tn_float": gemm(GEMM_INSTANCES[2]),
    "softmax_single_row": softmax(1000),
    "softmax_looped": softmax(4097),
    "all_reduce_sum": all_reduce_sum,
    "all_reduce_and": all_reduce_and,
}
# Each plant with the kernels that use the primitive it breaks. Simdgroup
# matrices: the steel attention and GEMM. simd_shuffle_xor: the steel
# attention's row reductions (the GEMM, softmax, the vector kernels and the
# reductions use none). Barriers: every kernel here that shares threadgroup
# memory between simdgroups, but the `and` reduction, whose unwaited read of
# poison is a bool of no valid value, which the sanitizer reports before any
# mismatch.
# simd_sum, simd_max, simd_all: softmax, the vector kernels, the reductions.
REACHES = {
    "fragment_layout": ["steel_attention", "steel_attention_split_head", "steel_gemm_nn_half",
                        "steel_gemm_tn_float"],
    "shuffle_xor_lanes": ["steel_attention", "steel_attention_split_head"],
    "barrier_no_wait": ["steel_attention", "steel_attention_split_head", "sdpa_vector",
                        "sdpa_vector_two_pass", "steel_gemm_nn_half", "steel_gemm_tn_float",
                        "softmax_single_row",
                        "softmax_looped", "all_reduce_sum"],
    "reduction_drops_lane": ["sdpa_vector", "sdpa_vector_two_pass", "softmax_single_row",
                             "softmax_looped", "all_reduce_sum", "all_reduce_and"],
}
CASES = [(plant, kernel) for plant, kernels in REACHES.items() for kernel in kernels]


@pytest.mark.parametrize("plant,kernel", CASES, ids=[f"{p}-fails-{k}" for p, k in CASES])
def test_planted_fault_fails_mlx_kernel(plant, kernel):
    with pytest.raises(AssertionError, match=MISMATCH):
        KERNELS[kernel](PLANTS[plant])
