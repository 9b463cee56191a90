"""A seeded random sweep over shapes, dtypes, masks, GQA and sinks. Raise the
number of cases with MLX_FUSED_ATTN_SWEEP; each case reseeds from its index,
and a failure names it."""

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import DTYPES, SWEEP, assert_close, device_params

HEAD_DIMS = [(32, 32), (64, 64), (72, 72), (80, 80), (96, 96), (128, 128), (192, 128), (192, 192), (256, 256)]


@device_params()
@pytest.mark.parametrize("case", range(SWEEP))
def test_random_case(device, case):
    rng = np.random.default_rng(case)
    dtype = list(DTYPES.values())[rng.integers(3)]
    B = int(rng.integers(1, 4))
    Hk = int(rng.integers(1, 4))
    Hq = Hk * int(rng.choice([1, 2, 4]))
    Lq = int(rng.choice([1, 5, 31, 32, 33, 64, 100, 129, 300]))
    Lk = int(rng.choice([1, 5, 31, 32, 33, 64, 100, 129, 300]))
    # (D of q and k, D_v of v): the pairs with a GPU kernel.
    D, Dv = HEAD_DIMS[rng.integers(len(HEAD_DIMS))]
    kind = rng.choice(["none", "causal", "bool", "additive"])
    what = f"case {case}: dtype={dtype} B={B} Hq={Hq} Hk={Hk} Lq={Lq} Lk={Lk} D={D} Dv={Dv} mask={kind}"
    q = mx.array(rng.standard_normal((B, Hq, Lq, D), np.float32)).astype(dtype)
    k = mx.array(rng.standard_normal((B, Hk, Lk, D), np.float32)).astype(dtype)
    v = mx.array(rng.standard_normal((B, Hk, Lk, Dv), np.float32)).astype(dtype)
    mask = {
        "none": None,
        "causal": "causal",
        "bool": mx.array(rng.random((Lq, Lk)) > 0.2),
        "additive": mx.array(rng.standard_normal((B, 1, Lq, Lk), np.float32)).astype(dtype),
    }[kind]
    sinks = mx.array(rng.standard_normal(Hq, np.float32)).astype(dtype) if rng.random() < 0.3 else None
    out = fa.scaled_dot_product_attention(q, k, v, scale=D**-0.5, mask=mask, sinks=sinks, stream=device)
    assert_close(out, q, k, v, D**-0.5, mask, sinks, what=what)
