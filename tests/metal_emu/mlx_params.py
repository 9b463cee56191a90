"""The parameter structs of MLX's Metal kernels (steel/attn/params.h and
steel/gemm/params.h in MLX's kernel headers) as ctypes structures, for the
tests that launch MLX's kernels in the emulator (test_mlx_kernels.py).
test_mlx_params.py checks them against the structs as g++ lays them out."""

import ctypes


class AttnParams(ctypes.Structure):
    """mlx::steel::AttnParams."""

    _fields_ = [
        ("B", ctypes.c_int),
        ("H", ctypes.c_int),
        ("D", ctypes.c_int),
        ("qL", ctypes.c_int),
        ("kL", ctypes.c_int),
        ("gqa_factor", ctypes.c_int),
        ("scale", ctypes.c_float),
        ("NQ", ctypes.c_int),
        ("NK", ctypes.c_int),
        ("NQ_aligned", ctypes.c_int),
        ("NK_aligned", ctypes.c_int),
        ("qL_rem", ctypes.c_int),
        ("kL_rem", ctypes.c_int),
        ("qL_off", ctypes.c_int),
        ("Q_strides", ctypes.c_int64 * 3),
        ("K_strides", ctypes.c_int64 * 3),
        ("V_strides", ctypes.c_int64 * 3),
        ("O_strides", ctypes.c_int64 * 3),
    ]


class AttnMaskParams(ctypes.Structure):
    """mlx::steel::AttnMaskParams."""

    _fields_ = [("M_strides", ctypes.c_int64 * 3)]


class GEMMParams(ctypes.Structure):
    """mlx::steel::GEMMParams."""

    _fields_ = [
        ("M", ctypes.c_int),
        ("N", ctypes.c_int),
        ("K", ctypes.c_int),
        ("lda", ctypes.c_int),
        ("ldb", ctypes.c_int),
        ("ldd", ctypes.c_int),
        ("tiles_n", ctypes.c_int),
        ("tiles_m", ctypes.c_int),
        ("batch_stride_a", ctypes.c_int64),
        ("batch_stride_b", ctypes.c_int64),
        ("batch_stride_d", ctypes.c_int64),
        ("swizzle_log", ctypes.c_int),
        ("gemm_k_iterations_aligned", ctypes.c_int),
        ("batch_ndim", ctypes.c_int),
    ]


STRUCTS = [
    (AttnParams, "mlx::steel::AttnParams", "mlx/backend/metal/kernels/steel/attn/params.h"),
    (AttnMaskParams, "mlx::steel::AttnMaskParams", "mlx/backend/metal/kernels/steel/attn/params.h"),
    (GEMMParams, "mlx::steel::GEMMParams", "mlx/backend/metal/kernels/steel/gemm/params.h"),
]
