"""fa::AttnParams (mlx_fused_attn/params.h) as a ctypes structure, for tests
that launch the attention kernels in the emulator: fill it, then bind it
directly (`buffers={4: AttnParams(...)}`) or as bytes(p).
test_attn_params.py checks it against the struct as g++ lays it out."""

import ctypes


class AttnParams(ctypes.Structure):
    _fields_ = [
        ("B", ctypes.c_int),
        ("H_q", ctypes.c_int),
        ("H_kv", ctypes.c_int),
        ("gqa_factor", ctypes.c_int),
        ("L_q", ctypes.c_int),
        ("L_k", ctypes.c_int),
        ("D", ctypes.c_int),
        ("D_v", ctypes.c_int),
        ("causal_offset", ctypes.c_int),
        ("scale_log2", ctypes.c_float),
        ("q_strides", ctypes.c_int64 * 3),
        ("k_strides", ctypes.c_int64 * 3),
        ("v_strides", ctypes.c_int64 * 3),
        ("o_strides", ctypes.c_int64 * 3),
        ("mask_strides", ctypes.c_int64 * 4),
        ("mask_block_strides", ctypes.c_int64 * 4),
        ("mask_pairs", ctypes.c_int),
    ]
