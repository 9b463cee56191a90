"""The dequantizing block loader (mlx_fused_attn/tile/quantized_block_loader.h)
in the Metal emulator, for every bit width of MLX's affine quantization (2,
3, 4, 5, 6 and 8: those of 3, 5 and 6 bits straddle words) and groups of
32, 64 and 128, against the host's dequantization of mx.quantize's layout
(test_quantized_attention_kernel.quantized). Rows of words, scales and
biases each have their own stride, their spare entries poisoned; a block
of fewer rows than the tile zero-fills the others and reads none of them
(the buffers end at the last row that exists). The same, for a few
blocks, with the chunks placed row-major (consecutive threads on
consecutive rows: the placement CUDA's QuantizedRowsFastest asks for)."""

import ctypes

import numpy as np
import pytest

from . import cases, emu
from .test_quantized_attention_kernel import quantized

METAL = "tests/metal_emu/kernels/quantized_block_loader.metal"


class LoaderDims(ctypes.Structure):
    _fields_ = [
        ("word_ld", ctypes.c_int64),
        ("scale_ld", ctypes.c_int64),
        ("bias_ld", ctypes.c_int64),
        ("scale_group_stride", ctypes.c_int64),
        ("bias_group_stride", ctypes.c_int64),
        ("group_size", ctypes.c_int),
        ("rows", ctypes.c_int),
    ]


@pytest.fixture(scope="module")
def prog():
    return emu.load(METAL)


def padded_rows(a, spare, fill, rows):
    """The first `rows` rows of `a`, each followed by `spare` entries of
    `fill`, the buffer ending at the last row's last value."""
    out = np.full((rows, a.shape[1] + spare), fill, a.dtype)
    out[:, : a.shape[1]] = a[:rows]
    return out.reshape(-1)[: out.size - spare], a.shape[1] + spare


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize(
    "dtype,rows,cols,threads,present,placement",
    [("float16", 16, 128, 128, 16, ""), ("float16", 8, 64, 128, 8, ""), ("bfloat16", 16, 128, 128, 11, ""),
     ("float32", 16, 128, 128, 1, ""), ("float16", 16, 96, 128, 16, ""), ("float16", 16, 96, 128, 13, ""),
     ("float16", 64, 128, 128, 64, ""), ("float16", 64, 128, 128, 37, ""), ("bfloat16", 64, 96, 128, 64, ""),
     ("bfloat16", 64, 96, 128, 50, ""), ("float16", 64, 32, 128, 64, ""), ("float16", 64, 32, 128, 29, ""),
     ("bfloat16", 32, 32, 128, 32, ""),
     ("float16", 32, 128, 32, 32, "_rows"), ("float16", 32, 128, 32, 21, "_rows"),
     ("bfloat16", 64, 128, 128, 64, "_rows"), ("bfloat16", 64, 128, 128, 45, "_rows"),
     ("float16", 32, 64, 32, 27, "_rows"), ("float16", 16, 96, 32, 16, "_rows")],
)
def test_dequantizes_mlx_layout(prog, bits, dtype, rows, cols, threads, present, placement):
    rng = np.random.default_rng(bits * 100 + rows + present)
    for group in (32, 64, 128):
        if cols % group:
            continue
        words, scales, biases, values = quantized(rng, (rows, cols), bits, group, dtype)
        w, w_ld = padded_rows(words, 3, 0xFFFFFFFF, present)
        s, s_ld = padded_rows(scales, 2, cases.poison(dtype), present)
        b, b_ld = padded_rows(biases, 5, cases.poison(dtype), present)
        dims = LoaderDims(word_ld=w_ld, scale_ld=s_ld, bias_ld=b_ld, scale_group_stride=1, bias_group_stride=1,
                          group_size=group, rows=present)
        out = prog.launch(
            f"quantized_block_load_{dtype}_b{bits}_{rows}x{cols}_t{threads}{placement}",
            buffers={0: w, 1: s, 2: b, 3: np.full(rows * cols, np.nan, np.float32), 4: dims},
            threadgroup=(threads, 1, 1),
        )
        want = np.zeros((rows, cols))
        want[:present] = values[:present]
        # fp32's scale * code + bias, rounded once to the dtype: float32
        # blocks may differ from the float64 rounding by the product's
        # rounding (2^-21 beside values up to 4).
        np.testing.assert_allclose(out[3].reshape(rows, cols), want, rtol=0, atol=2**-20, err_msg=f"group {group}")
