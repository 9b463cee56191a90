"""Smoke test of an installed wheel, run from outside the source tree in a
fresh virtual environment: the package imports against the MLX pip gave it,
says what it was built against, and one fused call on the CPU agrees with
mx.fast."""

import pathlib
import sys

import mlx.core as mx

import mlx_fused_attn as fa

here = pathlib.Path(fa.__file__).resolve()
if "site-packages" not in here.parts:
    sys.exit(f"imported mlx_fused_attn from {here}, not from the installed wheel")
print("mlx_fused_attn", fa.__version__, fa.build_info())

q, k, v = (
    mx.random.normal((1, 4, 100, 64), key=mx.random.key(i)).astype(mx.float16)
    for i in range(3)
)
ok, reason = fa.can_use_fused(q, k, v, scale=0.125, mask="causal", stream=mx.cpu)
if not ok:
    sys.exit(f"can_use_fused says the CPU call falls back: {reason}")
out = fa.scaled_dot_product_attention(
    q, k, v, scale=0.125, mask="causal", force_fused=True, stream=mx.cpu
)
ref = mx.fast.scaled_dot_product_attention(
    q.astype(mx.float32), k.astype(mx.float32), v.astype(mx.float32),
    scale=0.125, mask="causal", stream=mx.cpu,
)
err = mx.abs(out.astype(mx.float32) - ref).max().item()
if not err < 2e-3:
    sys.exit(f"fused and mx.fast differ by {err} (fp16, causal, CPU)")
print(f"fused CPU call matches mx.fast (max |diff| {err:.2e})")
