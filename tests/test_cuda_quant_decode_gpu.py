"""The quantized kernel's variants on a GPU.

- The decode sweep's (benchmarks/cuda_quant_decode_sweep.cu) against the
  bf16 decode of the same cache dequantized: the default tiles, the key-slice
  tiles (choose_quantized_sliced_tiles) and the decode tiles
  (choose_quantized_decode_tiles), each with the loader's
  chunk policies (quantized_block_loader.h's QuantizedFloatChunks, and
  tile/cuda_quantized_chunks.h's 16-bit pairs, 16-byte word loads and
  row-major placement), split kernel and combine, then the one kernel, at
  B = 1, 4096 keys and 4133 (the key slices' ragged quarter and a quarter
  past the last key). A variant that reads, places or dequantizes a block
  wrong moves its output by far more than the sweep's 1e-2 (its header
  says why) and prints WRONG. Needs nvcc and an sm_90 GPU (the bf16
  reference is a wgmma kernel).
- The package's op (quantized_scaled_dot_product_attention) on MLX's CUDA
  backend, against dequantize-then-attend, for every kernel its plan picks
  (quantized_kernel_choice.h: the default, key-slice and decode tiles, each
  chunk policy, the float-chunk kernel that reads words not 16-byte
  aligned), under the rule and with MLX_FUSED_ATTN_QUANT_DECODE_TILES and
  MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS forcing each; the plan's choice
  is checked too (the private _quantized_plan). Needs MLX's CUDA backend.

Each skips without what it needs."""

import os
import subprocess

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from test_cuda_backward_gpu import ARCH, NVCC, REPO
from conftest import FLOOR, reference, to_np
from test_quantized_attention import dequantized, quantized

pytestmark = pytest.mark.gpu

# The sweep's quantized rows of a case whose plan splits its keys: the
# plan, its halved and doubled splits, the one-stage schedule, and three
# chunk policies; the key slices at three split counts and in float
# chunks; the decode tiles at two split counts, each chunk policy at the
# larger and the last also at the smaller.
ROWS = 17


@pytest.mark.skipif(NVCC is None or ARCH != "90a", reason="needs nvcc and an sm_90 GPU")
def test_quantized_variants_match_the_bf16_decode(tmp_path):
    exe = tmp_path / "quant_decode_sweep"
    build = subprocess.run(
        [NVCC, "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a", f"-I{REPO}",
         os.path.join(REPO, "benchmarks", "cuda_quant_decode_sweep.cu"), "-o", str(exe)],
        capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr
    # Cases 1 and 3: B = 1, H = 32 / 8, 4096 and 4133 keys.
    for case in ("1", "3"):
        run = subprocess.run([str(exe), case], capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        rows = [line for line in run.stdout.splitlines() if " err " in line]
        assert len(rows) == ROWS, run.stdout
        assert all(line.rstrip().endswith(" ok") for line in rows), run.stdout



ON_CUDA = mx.is_available(mx.gpu) and mx.cuda.is_available()
DECODE_TILES = {"bq": 16, "bk": 32, "warps": 1, "min_blocks": 8, "key_slices": False}
SLICED_TILES = {"bq": 16, "bk": 64, "warps": 4, "min_blocks": 2, "key_slices": True}
# The switch's values and the tiles each forces.
FORCED = {"1": "decode", "slices": "slices", "0": "default"}
DECODE_SWITCH = "MLX_FUSED_ATTN_QUANT_DECODE_TILES"
FLOAT_SWITCH = "MLX_FUSED_ATTN_QUANT_FLOAT_CHUNKS"

# (what, B, H_q, H_kv, L_k, D, dtype, bits, an array mask, misaligned
# words, the tiles the rule takes on an H100's 132 multiprocessors (the
# decode tiles where L_k x B x H_kv >= 1024 x 132 x 8: B = 16 at 9000 keys,
# past a whole block; else the key slices where L_k x B x H_kv >= 512 x
# 132 x 2: B = 4 at 9000, B = 5 at 4133), the default and key-slice tiles'
# chunk policy, whether decode and key-slice tiles exist there).
CASES = [
    ("B=1 4K bf16", 1, 32, 8, 4096, 128, mx.bfloat16, 4, False, False, "default", "packed_16b_rows",
     True),
    ("B=4 9000 bf16", 4, 32, 8, 9000, 128, mx.bfloat16, 4, False, False, "slices", "packed_16b_rows",
     True),
    ("B=5 4133 bf16 bool mask", 5, 32, 8, 4133, 128, mx.bfloat16, 4, True, False, "slices",
     "packed_16b_rows", True),
    ("B=16 9000 bf16", 16, 32, 8, 9000, 128, mx.bfloat16, 4, False, False, "decode",
     "packed_16b_rows", True),
    ("B=16 9000 fp16 D=64 bool mask", 16, 32, 8, 9000, 64, mx.float16, 4, True, False, "decode",
     "packed_16b_rows", True),
    ("B=1 3000 fp16 D=96", 1, 32, 8, 3000, 96, mx.float16, 4, False, False, "default", "packed_16b",
     True),
    ("B=2 2000 bf16 D=256", 2, 16, 4, 2000, 256, mx.bfloat16, 4, False, False, "default",
     "packed_16b_rows", False),
    ("B=16 9000 bf16 words 17 apart", 16, 32, 8, 9000, 128, mx.bfloat16, 4, False, True, "decode",
     "packed_16b_rows", True),
    ("B=16 9000 bf16 8 bits", 16, 32, 8, 9000, 128, mx.bfloat16, 8, False, False, "default",
     "float", False),
]
# The rule, each tile choice forced, the float chunks forced (alone and
# with the decode tiles and the key slices).
SWITCHES = [{}, {DECODE_SWITCH: "1"}, {DECODE_SWITCH: "slices"}, {DECODE_SWITCH: "0"},
            {FLOAT_SWITCH: "1"}, {DECODE_SWITCH: "1", FLOAT_SWITCH: "1"},
            {DECODE_SWITCH: "slices", FLOAT_SWITCH: "1"}]


def tiles_kind(tiles):
    return "decode" if tiles == DECODE_TILES else "slices" if tiles == SLICED_TILES else "default"


def misaligned(qx):
    """`qx` with its words' rows 17 words apart (a column of padding cut
    off): the same codes at a row stride no 16-byte load steps, which the
    backend reads with the float-chunk kernel at the plan's tiles."""
    w = qx[0]
    padded = mx.concatenate([w, mx.zeros(w.shape[:-1] + (1,), w.dtype)], axis=-1)
    return (padded[..., : w.shape[-1]],) + tuple(qx[1:])


@pytest.mark.skipif(not ON_CUDA, reason="needs MLX's CUDA backend")
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_planned_kernel_matches_dequantize_then_attend(monkeypatch, case):
    what, B, Hq, Hk, Lk, D, dtype, bits, masked, odd_words, rule_kind, chunks, has_decode = case
    group = 64 if D % 64 == 0 else 32
    rng = np.random.default_rng(B * 1000 + Lk + D)
    q = mx.array(rng.standard_normal((B, Hq, 1, D), np.float32)).astype(dtype)
    # Scores four times 1/sqrt(D)'s: each row picks out a few keys, so that
    # a block read wrong moves the output (uniform weights over thousands
    # of keys would average it away).
    k = mx.array(4 * rng.standard_normal((B, Hk, Lk, D), np.float32)).astype(dtype)
    v = mx.array(rng.standard_normal((B, Hk, Lk, D), np.float32)).astype(dtype)
    qk, qv = quantized(k, group, bits), quantized(v, group, bits)
    mask = mx.array(rng.random((B, 1, 1, Lk)) > 0.2) if masked else None
    scale = D**-0.5
    # The FlashAttention rule against dequantize-then-attend, as
    # test_quantized_attention.py's: twice the float path's error in the
    # dtype, plus the dtype's floor.
    k32, v32 = dequantized(qk, group, bits), dequantized(qv, group, bits)
    ref = reference(q, k32, v32, scale, mask)
    naive = mx.fast.scaled_dot_product_attention(
        q, k32.astype(dtype), v32.astype(dtype), scale=scale, mask=mask, stream=mx.cpu)
    bound = 2 * np.abs(to_np(naive) - ref).max() + FLOOR[dtype] * max(1.0, np.abs(ref).max())
    if odd_words:
        qk, qv = misaligned(qk), misaligned(qv)
    for switches in SWITCHES:
        for name in (DECODE_SWITCH, FLOAT_SWITCH):
            monkeypatch.delenv(name, raising=False)
        for name, value in switches.items():
            monkeypatch.setenv(name, value)
        plan = fa._ext._quantized_plan(q, qk, qv, scale, mask, group, bits, stream=mx.gpu)
        assert plan["fused"], plan["reason"]
        kind = tiles_kind(plan["tiles"])
        if DECODE_SWITCH in switches:
            forced = FORCED[switches[DECODE_SWITCH]] if has_decode else "default"
            assert kind == forced, (switches, plan)
        elif fa._ext.cuda_multiprocessors() == 132:
            assert kind == rule_kind, plan
        float_chunks = switches.get(FLOAT_SWITCH) == "1" or bits != 4
        want = "float" if float_chunks else "packed_16b" if kind == "decode" else chunks
        assert plan["chunks"] == want, (switches, plan)
        out = fa.quantized_scaled_dot_product_attention(
            q, qk, qv, scale, mask, group, bits, stream=mx.gpu)
        assert out.dtype == dtype
        err = np.abs(to_np(out) - ref).max()
        assert err <= bound, f"{what} {switches} {plan}: max error {err:.3g} > {bound:.3g}"
