"""fa::QuantKvParams (mlx_fused_attn/quantized_kv_params.h) as a ctypes
structure, for the quantized-KV attention kernels in the emulator.
test_attn_params.py checks it against the struct as g++ lays it out."""

import ctypes


class QuantKvOperand(ctypes.Structure):
    _fields_ = [
        ("word_strides", ctypes.c_int64 * 3),
        ("scale_strides", ctypes.c_int64 * 3),
        ("bias_strides", ctypes.c_int64 * 3),
        ("scale_group_stride", ctypes.c_int64),
        ("bias_group_stride", ctypes.c_int64),
    ]


class QuantKvParams(ctypes.Structure):
    _fields_ = [
        ("bits", ctypes.c_int),
        ("group_size", ctypes.c_int),
        ("k", QuantKvOperand),
        ("v", QuantKvOperand),
    ]
