"""A small run of the CUDA neighborhood kernels, for compute-sanitizer
(memcheck: out-of-bounds and misaligned accesses; racecheck: shared-memory
races, of the key coordinates too):

    compute-sanitizer --tool memcheck python tests/cuda_na_sanitizer_cases.py
    compute-sanitizer --tool racecheck python tests/cuda_na_sanitizer_cases.py

Covers 1-D, 2-D and 3-D kernels, each dtype and head dim, dilation with
unequal groups (an empty tile), causal axes, ragged tiles and key blocks,
an input at an odd offset (copied by the host), 1-D runs of tiles (the
ring of key blocks) and a poisoned output; each
result is checked against the fused CPU kernel. Exits 1 on a wrong result.
Not collected by pytest: under the sanitizers a run takes minutes.
"""

import os
import sys

os.environ.setdefault("MLX_FUSED_ATTN_POISON", "1")

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402

import mlx_fused_attn as fa  # noqa: E402

TOL = {mx.float16: 4e-3, mx.bfloat16: 3e-2, mx.float32: 1e-4}


def case(dtype, D, spatial, kernel, dilation, causal, seed, misaligned=False, run=0):
    # run > 0: 1-D threadgroups take runs of that many tiles (the ring path).
    os.environ["MLX_FUSED_ATTN_NA_RUN"] = str(run)
    keys = mx.random.split(mx.random.key(seed), 3)
    shape = (2, *spatial, 3, D)
    q, k, v = (mx.random.normal(shape, key=key).astype(dtype) for key in keys)
    if misaligned:
        flat = mx.concatenate([mx.zeros((1,), dtype), q.reshape(-1)])
        q = flat[1:].reshape(shape)
    kw = dict(dilation=list(dilation), is_causal=list(causal))
    ok, reason = fa.neighborhood_can_use_fused(q, k, v, list(kernel), stream=mx.gpu, **kw)
    assert ok, reason
    out = fa.neighborhood_attention(q, k, v, list(kernel), stream=mx.gpu, **kw)
    want = fa.neighborhood_attention(q, k, v, list(kernel), stream=mx.cpu, **kw)
    err = np.abs(np.array(out.astype(mx.float32)) - np.array(want.astype(mx.float32))).max()
    status = "ok" if err <= TOL[dtype] else "FAIL"
    print(f"{status} {dtype} D={D} spatial={spatial} kernel={kernel} dilation={dilation} "
          f"causal={causal} misaligned={misaligned} max err {err:.2e}", flush=True)
    return status == "ok"


def main():
    results = [
        case(mx.float16, 64, (300,), (31,), (1,), (False,), 1),
        case(mx.bfloat16, 32, (129,), (5,), (2,), (True,), 2),
        case(mx.float32, 128, (70,), (9,), (1,), (False,), 3),
        case(mx.float16, 64, (20, 37), (7, 5), (1, 2), (False, True), 4),
        case(mx.float32, 32, (17, 19), (3, 3), (2, 1), (False, False), 5),
        case(mx.bfloat16, 128, (6, 9, 21), (3, 3, 5), (1, 1, 2), (True, False, False), 6),
        case(mx.float16, 32, (5, 7, 40), (5, 3, 9), (1, 2, 1), (False, False, True), 7),
        case(mx.float16, 64, (100,), (13,), (1,), (False,), 8, misaligned=True),
        case(mx.float16, 64, (700,), (63,), (1,), (False,), 9, run=3),
        case(mx.bfloat16, 64, (555,), (9,), (2,), (True,), 10, run=2),
    ]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
