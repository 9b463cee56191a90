"""fa::NaParams (mlx_fused_attn/families/neighborhood/na_params.h) and fa::NaGrid
(mlx_fused_attn/families/neighborhood/na_grid.h) as ctypes structures, for tests that
launch the neighborhood kernels in the emulator. test_na_kernel.py checks
their layouts against the C++ structs as g++ lays them out."""

import ctypes


class NaAxis(ctypes.Structure):
    _fields_ = [
        ("n", ctypes.c_int),
        ("k", ctypes.c_int),
        ("d", ctypes.c_int),
        ("causal", ctypes.c_int),
    ]


class NaParams(ctypes.Structure):
    _fields_ = [
        ("B", ctypes.c_int),
        ("H", ctypes.c_int),
        ("D", ctypes.c_int),
        ("D_v", ctypes.c_int),
        ("n_axes", ctypes.c_int),
        ("L", ctypes.c_int),
        ("scale_log2", ctypes.c_float),
        ("axes", NaAxis * 3),
        ("q_strides", ctypes.c_int64 * 5),
        ("k_strides", ctypes.c_int64 * 5),
        ("v_strides", ctypes.c_int64 * 5),
        ("o_strides", ctypes.c_int64 * 5),
    ]


class NaGrid(ctypes.Structure):
    _fields_ = [
        ("warps", ctypes.c_int * 3),
        ("extent", ctypes.c_int * 3),
        ("tiles", ctypes.c_int * 3),
        ("blocks", ctypes.c_int),
        ("run", ctypes.c_int),
    ]
