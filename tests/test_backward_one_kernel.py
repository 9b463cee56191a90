"""The CUDA backward in both forms, set by MLX_FUSED_ATTN_BWD_ONE_KERNEL:
one kernel ("1", opt-in, as it ran slower, issue 46: dK/dV adds
dS K into an fp32 dQ accumulator through atomics, a conversion writes dQ)
and two ("0" or unset, the default: a dQ kernel of its own). For causal and
plain calls, bool and additive masks, GQA, D 64 and 128, every dtype and
lengths that are not whole blocks, each form's gradients meet the rule of
test_backward.py against the float64 reference (mx.grad through the plain
ops on the CPU), and the two forms agree within the same bound. Skips
without a CUDA GPU."""

import mlx.core as mx
import numpy as np
import pytest

from conftest import DTYPES, FLOOR, rand, to_np
from test_backward import attention64, f64, fused, gradients, naive

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (mx.is_available(mx.gpu) and hasattr(mx, "cuda") and mx.cuda.is_available()),
        reason="needs a CUDA GPU in MLX",
    ),
]

# name: (B, H_q, H_kv, L_q, L_k, D, mask); no length is a whole number of
# the kernels' 64- or 128-row blocks.
CASES = {
    "plain-d128": (1, 2, 2, 200, 200, 128, None),
    "causal-d64": (2, 2, 2, 130, 130, 64, "causal"),
    "causal-gqa-d128": (1, 4, 2, 100, 150, 128, "causal"),
    "bool-d64": (1, 2, 2, 97, 160, 64, "bool"),
    "additive-gqa-d64": (1, 4, 1, 65, 129, 64, "additive"),
    "gqa-8-d128": (1, 8, 1, 70, 70, 128, None),
}


def make_case(name, dtype):
    B, H_q, H_kv, L_q, L_k, D, mask = CASES[name]
    q = rand((B, H_q, L_q, D), dtype, 1)
    k = rand((B, H_kv, L_k, D), dtype, 2)
    v = rand((B, H_kv, L_k, D), dtype, 3)
    key = mx.random.key(4)
    if mask == "bool":
        mask = mx.random.uniform(shape=(B, 1, L_q, L_k), key=key) > 0.3
    elif mask == "additive":
        noise = mx.random.normal((L_q, L_k), key=key)
        mask = mx.where(mx.random.uniform(shape=(L_q, L_k), key=key) > 0.9, -mx.inf, noise).astype(dtype)
    w = rand((B, H_q, L_q, D), dtype, 5)
    return q, k, v, mask, w


def fused_gradients(monkeypatch, form, q, k, v, mask, w):
    """dQ, dK, dV of the fused call on the GPU with the backward forced to
    `form` ("1": one kernel, "0" or None, unset: two); the switch is read as the call is
    planned, so it is set until the gradients are evaluated."""
    if form is None:
        monkeypatch.delenv("MLX_FUSED_ATTN_BWD_ONE_KERNEL", raising=False)
    else:
        monkeypatch.setenv("MLX_FUSED_ATTN_BWD_ONE_KERNEL", form)
    with mx.stream(mx.gpu):
        got = gradients(fused, q, k, v, mask, None, w, False)
        mx.eval(got)
    monkeypatch.delenv("MLX_FUSED_ATTN_BWD_ONE_KERNEL", raising=False)
    return [to_np(g) for g in got]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", list(CASES))
def test_both_forms_match_the_reference_and_each_other(monkeypatch, name, dtype):
    q, k, v, mask, w = make_case(name, DTYPES[dtype])
    one = fused_gradients(monkeypatch, "1", q, k, v, mask, w)
    two = fused_gradients(monkeypatch, "0", q, k, v, mask, w)
    with mx.stream(mx.cpu):
        low = gradients(naive, q, k, v, mask, None, w, False)
        ref = gradients(attention64, *map(f64, (q, k, v, mask, None, w)), mask_grad=False)
    for g, a, b, n, r in zip(["dq", "dk", "dv"], one, two, low, ref):
        r = np.array(r)
        naive_err = np.abs(to_np(n) - r).max(initial=0.0)
        bound = 2 * naive_err + FLOOR[q.dtype] * max(1.0, np.abs(r).max(initial=0.0))
        what = f"{name} {dtype} {g}"
        assert a.shape == r.shape and b.shape == r.shape, what
        assert np.abs(a - r).max() <= bound, f"{what}: one kernel off the reference"
        assert np.abs(b - r).max() <= bound, f"{what}: two kernels off the reference"
        assert np.abs(a - b).max() <= bound, f"{what}: the forms disagree"


@pytest.mark.parametrize("value", [None, "yes"])
def test_two_kernels_unless_the_switch_is_1(monkeypatch, value):
    # Unset or any value but "1", the backward is the two-kernel form: the
    # same bits as "0" (no atomics there, so no order to differ in).
    q, k, v, mask, w = make_case("causal-gqa-d128", mx.bfloat16)
    two = fused_gradients(monkeypatch, "0", q, k, v, mask, w)
    got = fused_gradients(monkeypatch, value, q, k, v, mask, w)
    for g, a, b in zip(["dq", "dk", "dv"], got, two):
        np.testing.assert_array_equal(a, b, err_msg=f"{value} {g}")
