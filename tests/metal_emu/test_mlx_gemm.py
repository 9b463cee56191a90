"""MLX 0.32.4's fused steel GEMM (`gemm` of steel/gemm/kernels/
steel_gemm_fused.h: D = A B, or alpha A B + beta C), unmodified, in the
emulator, against a float64 reference, for the four instantiations of
mlx_kernels/steel_gemm_fused.metal (each transposition, each element type,
four of MLX's tile shapes).

The dispatch is MLX's steel_matmul_regular_axpby (mlx/backend/metal/
matmul.cpp, read at ml-explore/mlx 846d176, version 0.32.2-dev; the kernel
header there is the 0.32.4 wheel's): A, B, C, D at buffers 0, 1, 2, 3,
GEMMParams at 4 and GEMMAddMMParams at 5; function constants has_batch (10),
use_out_source (100), do_axpby (110), align_M, align_N, align_K (200-202);
tiles_n by tiles_m threadgroups a matrix (swizzle_log 0, as MLX sets it), the
batch along z, 32 x wn x wm threads. The leading dimensions are the inputs'
row strides, as MLX's check_transpose passes them (here wider than the rows,
the spare elements NaN, so that a read past a row fails), and the batch
strides leave spare NaN rows between matrices too.

MLX's epilogue reads C past its last row: BlockMMA::apply_epilogue_safe
(steel/gemm/mma.h) checks each element's column against the tile's bounds
but not its row, so the last row of tiles reads up to BM - 1 rows beyond M
(and stores none of them: store_result_safe checks both). On a GPU the read
lands in the allocation's slack or the next buffer and is discarded; here
it is an out-of-bounds read, which the address sanitizer reports. So C gets
a tile's height of spare NaN rows after its last matrix, and the test still
requires that nothing read there reaches D."""

import ctypes
import zlib

import numpy as np
import pytest

from . import cases, forward_error, mlx_emu
from .mlx_params import GEMMAddMMParams, GEMMParams

# host name fields: (transpose a, transpose b, dtype, bm, bn, bk, wm, wn)
INSTANCES = [
    (False, False, "float16", 64, 64, 16, 2, 2),
    (False, True, "bfloat16", 64, 32, 32, 2, 2),
    (True, False, "float32", 32, 64, 16, 1, 2),
    (True, True, "float16", 64, 32, 8, 4, 1),
]
# Function constants of steel_gemm_fused.h.
HAS_BATCH, USE_OUT_SOURCE, DO_AXPBY, ALIGN_M, ALIGN_N, ALIGN_K = 10, 100, 110, 200, 201, 202
# (batch, M, N, K): sizes no tile divides, a single row or column, more than
# one tile each way, and one shape every tile divides (the aligned paths).
SHAPES = [(1, 33, 65, 127), (2, 127, 33, 65), (1, 1, 127, 33), (2, 128, 64, 64)]
# (alpha, beta) of D = alpha A B + beta C, or None for D = A B. MLX's AddMM
# sets use_out_source with them, and do_axpby unless both are 1.
EPILOGUES = [None, (1.0, 1.0), (0.5, -2.0)]
# Float unit roundoff: the kernel accumulates in float.
EPS_ACC = 2.0**-24
EPS = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
# Spare elements at the end of each row and between matrices of a batch.
ROW_PAD, MATRIX_PAD = 3, 5


def instance_name(inst):
    ta, tb, dtype, bm, bn, bk, wm, wn = inst
    t = ("t" if ta else "n") + ("t" if tb else "n")
    return f"steel_gemm_fused_{t}_{dtype}_{dtype}_bm{bm}_bn{bn}_bk{bk}_wm{wm}_wn{wn}"


def strided(rng, batch, rows, cols, dtype, tail_rows=0):
    """(storage with rows of `cols` + ROW_PAD elements, matrices MATRIX_PAD
    rows apart and `tail_rows` more rows after the last, the spares NaN; the
    matrices in float64; the row stride; the batch stride)."""
    ld = cols + ROW_PAD
    bstride = (rows + MATRIX_PAD) * ld
    values, values64 = cases.to_device(rng.standard_normal((batch, rows, cols)), dtype)
    store = np.full(batch * bstride + tail_rows * ld, cases.poison(dtype))
    view = store[: batch * bstride].reshape(batch, rows + MATRIX_PAD, ld)
    view[:, :rows, :cols] = values
    return store, values64, ld, bstride


def run_gemm(inst, batch, M, N, K, epilogue=None, seed=0, defines=(), schedule="fair"):
    """MLX's GEMM on one case (emu.Program.launch's `schedule`); returns
    (D in float64, the float64 reference, the bound of their difference)."""
    ta, tb, dtype, bm, bn, bk, wm, wn = inst
    rng = np.random.default_rng(seed)
    # A is M x K, stored K x M when transposed; B is K x N, stored N x K.
    a, a64, lda, a_bs = strided(rng, batch, *((K, M) if ta else (M, K)), dtype)
    b, b64, ldb, b_bs = strided(rng, batch, *((N, K) if tb else (K, N)), dtype)
    a64 = a64.transpose(0, 2, 1) if ta else a64
    b64 = b64.transpose(0, 2, 1) if tb else b64
    product = a64 @ b64
    magnitude = np.abs(a64) @ np.abs(b64)
    d = np.full(batch * M * N, cases.poison(dtype))
    tiles_n, tiles_m = -(-N // bn), -(-M // bm)
    params = GEMMParams(
        M=M, N=N, K=K, lda=lda, ldb=ldb, ldd=N, tiles_n=tiles_n, tiles_m=tiles_m,
        batch_stride_a=a_bs, batch_stride_b=b_bs, batch_stride_d=M * N,
        swizzle_log=0, gemm_k_iterations_aligned=K // bk, batch_ndim=1,
    )
    buffers = {0: a, 1: b, 3: d, 4: params}
    constants = {HAS_BATCH: False, USE_OUT_SOURCE: epilogue is not None, DO_AXPBY: False,
                 ALIGN_M: M % bm == 0, ALIGN_N: N % bn == 0, ALIGN_K: K % bk == 0}
    ref = product
    if epilogue is not None:
        alpha, beta = epilogue
        c, c64, ldc, c_bs = strided(rng, batch, M, N, dtype, tail_rows=bm)
        buffers[2] = c
        buffers[5] = GEMMAddMMParams(ldc=ldc, fdc=1, batch_stride_c=c_bs, alpha=alpha, beta=beta)
        constants[DO_AXPBY] = (alpha, beta) != (1.0, 1.0)
        ref = alpha * product + beta * c64
        magnitude = abs(alpha) * magnitude + abs(beta) * np.abs(c64)
    name = instance_name(inst)
    prog = mlx_emu.load("steel_gemm_fused", only=name, defines=defines)
    res = prog.launch(name, buffers, constants=constants, grid=(tiles_n, tiles_m, batch),
                      threadgroup=(32, wn, wm), schedule=schedule)
    got = cases.from_device(res[3], dtype).reshape(batch, M, N)
    # A sum of K float products, each exact or rounded once, then the
    # epilogue's multiply and add: (K + 2) float roundoffs of the sum of
    # magnitudes (the recursive summation bound, any order); then D's
    # rounding to its type.
    bound = (K + 2) * EPS_ACC * magnitude + EPS[dtype] * np.abs(ref)
    return got, ref, bound


# Each instantiation on every shape, the epilogues in turn, every other case
# under an adversarial schedule (threads interleaved at random between
# synchronisations, emu.Program.launch) rather than round robin.
CASES = [
    (inst, shape, EPILOGUES[(i + j) % len(EPILOGUES)], "fair" if (i + j) % 2 == 0 else i + j)
    for i, inst in enumerate(INSTANCES)
    for j, shape in enumerate(SHAPES)
]


def case_id(case):
    inst, (batch, M, N, K), epilogue, schedule = case
    tail = "" if epilogue is None else f"-alpha{epilogue[0]:g}_beta{epilogue[1]:g}"
    order = "" if schedule == "fair" else "-adversarial"
    return f"{instance_name(inst)}-B{batch}_M{M}_N{N}_K{K}{tail}{order}"


@pytest.mark.parametrize("inst,shape,epilogue,schedule", CASES, ids=[case_id(c) for c in CASES])
def test_steel_gemm_matches_reference(inst, shape, epilogue, schedule):
    seed = zlib.crc32(repr((inst, shape, epilogue)).encode())
    got, ref, bound = run_gemm(inst, *shape, epilogue=epilogue, seed=seed, schedule=schedule)
    forward_error.check(got, ref, bound, case_id((inst, shape, epilogue, schedule)))


def test_gemm_params_layout_matches_the_kernel():
    name = instance_name(INSTANCES[0])
    prog = mlx_emu.load("steel_gemm_fused", only=name)
    sizes = {p.index: p.element_size for p in prog.kernels[name] if p.kind == "buffer"}
    assert sizes[4] == ctypes.sizeof(GEMMParams)
    assert sizes[5] == ctypes.sizeof(GEMMAddMMParams)
