"""fa::AttnBwdParams (mlx_fused_attn/families/attention_backward/backward_params.h) as a ctypes
structure, for the backward kernels in the emulator; test_attn_params.py
checks it against g++'s layout of the C++ struct."""

import ctypes

from .attn_params import AttnParams


class AttnBwdParams(ctypes.Structure):
    _fields_ = [
        ("fwd", AttnParams),
        ("do_strides", ctypes.c_int64 * 3),
        ("dq_strides", ctypes.c_int64 * 3),
        ("dk_strides", ctypes.c_int64 * 3),
        ("dv_strides", ctypes.c_int64 * 3),
        ("list_strides", ctypes.c_int64 * 2),
        ("dkdv_list_row", ctypes.c_int64),
        ("dq_lists_start", ctypes.c_int64),
        ("dq_list_row", ctypes.c_int64),
    ]
