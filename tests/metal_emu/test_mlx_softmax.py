"""MLX 0.32.4's softmax kernels, unmodified, in the emulator, against a
float64 reference: `softmax_single_row` (MLX's "block_softmax_*", one
threadgroup a row held in registers) and `softmax_looped` (one threadgroup
a row, read three times), for float, half and bfloat and the precise
(float-accumulating) variants of half and bfloat (mlx_kernels/softmax.metal).

The dispatch is MLX's Softmax::eval_gpu (mlx/backend/metal/softmax.cpp, read
at ml-explore/mlx 846d176, version 0.32.2-dev; softmax.h there is the 0.32.4
wheel's): rows longer than 4096 take the looped kernel with the pipeline's
maximum threadgroup (1024 on Apple GPUs), others the single-row kernel with
32 * ceil(ceil(axis / 4) / 32) threads; one threadgroup a row; the input at
buffer 0, the output at 1, the row length at 2. softmax.h's parameters carry
no [[buffer(n)]]: those are the indices Metal assigns them in declaration
order, as the emulator's binder does (test_emulator.py)."""

import numpy as np
import pytest

from . import cases, forward_error, mlx_emu

# MLX's limits (softmax.cpp, defines.h).
LOOPED_LIMIT = 4096
N_READS = 4
MAX_THREADS = 1024
# (dtype, precise): the instantiations of mlx_kernels/softmax.metal.
KINDS = [("float32", False), ("float16", False), ("bfloat16", False), ("float16", True),
         ("bfloat16", True)]
# Row lengths: one element, a partial last read and simdgroup (1000), the
# largest single-row length (4096, 1024 threads), one past it (4097, the
# looped kernel with a second, nearly empty pass), and three passes (9001).
# Each kind on 1000 and 4097 and, in turn, on one of the others.
OTHER_AXES = [1, 4096, 9001]
GRID = [
    (kind, axis)
    for i, kind in enumerate(KINDS)
    for axis in sorted({1000, 4097, OTHER_AXES[i % len(OTHER_AXES)]})
]
# Unit roundoffs. An output's relative error is the accumulator's few ulps
# (exp, a sum of positive terms, a division: ULPS leaves room for the sum's
# depth) plus |x - max| of them (x - max is rounded before exp, which turns
# an absolute error of the argument into a relative one of the result), and
# the output's rounding.
ULPS = 16
EPS = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
# Outputs below the type's normal range lose their relative precision: half's
# subnormal spacing bounds their absolute error (an exp in half underflowing,
# then the output's rounding); bfloat and float share float's range.
TINY = {"float32": 2.0**-126, "float16": 2.0**-24, "bfloat16": 2.0**-126}


def kernel_name(dtype, precise, axis):
    form = "looped" if axis > LOOPED_LIMIT else "block"
    return f"{form}_softmax_{'precise_' if precise else ''}{dtype}"


def dispatch(axis):
    """The threadgroup's size for rows of `axis`, as MLX's
    Softmax::eval_gpu picks it."""
    if axis > LOOPED_LIMIT:
        return MAX_THREADS
    return 32 * -(-(-(-axis // N_READS)) // 32)


def reference(x, dtype, precise):
    """(float64 softmax of x's rows, the bound of each output's error)."""
    shifted = x - x.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    ref = e / e.sum(axis=-1, keepdims=True)
    acc = "float32" if precise else dtype
    rel = (ULPS + np.abs(shifted)) * EPS[acc] + EPS[dtype]
    return ref, rel * ref + TINY[dtype]


def run_softmax(dtype, precise, axis, rows=2, seed=0, defines=()):
    """MLX's softmax of `rows` rows of `axis` elements; returns (its output
    in float64, the float64 reference, the bound of their difference)."""
    rng = np.random.default_rng(seed)
    x, x64 = cases.to_device(3.0 * rng.standard_normal((rows, axis)), dtype)
    out = np.full((rows, axis), cases.poison(dtype))
    name = kernel_name(dtype, precise, axis)
    prog = mlx_emu.load("softmax", only=name, defines=defines)
    res = prog.launch(name, {0: x, 1: out, 2: np.array([axis], np.int32)},
                      grid=(rows, 1, 1), threadgroup=(dispatch(axis), 1, 1))
    return (cases.from_device(res[1], dtype), *reference(x64, dtype, precise))


@pytest.mark.parametrize("kind,axis", GRID, ids=[f"{kernel_name(*k, a)}-axis{a}" for k, a in GRID])
def test_softmax_matches_reference(kind, axis):
    dtype, precise = kind
    got, ref, bound = run_softmax(dtype, precise, axis, seed=axis)
    forward_error.check(got, ref, bound, f"{kernel_name(dtype, precise, axis)}, rows of {axis}")


def test_the_binder_gives_softmax_metals_indices():
    """softmax.h declares in, out, axis_size without [[buffer(n)]]; Metal
    gives them 0, 1, 2, where MLX's host code binds them."""
    prog = mlx_emu.load("softmax", only="block_softmax_float32")
    assert [(p.name, p.index) for p in prog.kernels["block_softmax_float32"] if p.kind == "buffer"] == [
        ("in", 0), ("out", 1), ("axis_size", 2),
    ]
