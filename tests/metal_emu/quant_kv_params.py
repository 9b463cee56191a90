"""fa::QuantKVParams (mlx_fused_attn/quantized_kv_params.h) as a ctypes
structure, for the quantized-KV attention kernels in the emulator.
test_attn_params.py checks it against the struct as g++ lays it out."""

import ctypes


class QuantKVParams(ctypes.Structure):
    _fields_ = [
        ("k_word_strides", ctypes.c_int64 * 3),
        ("k_scale_strides", ctypes.c_int64 * 3),
        ("k_bias_strides", ctypes.c_int64 * 3),
        ("v_word_strides", ctypes.c_int64 * 3),
        ("v_scale_strides", ctypes.c_int64 * 3),
        ("v_bias_strides", ctypes.c_int64 * 3),
        ("group_size", ctypes.c_int),
        ("bits", ctypes.c_int),
    ]
