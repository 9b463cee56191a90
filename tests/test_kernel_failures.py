"""A kernel family that cannot be built falls back safely: the test hook
MLX_FUSED_ATTN_BREAK_FAMILY puts a compile error into one family's source
(GPU: the real compiler fails on it; CPU: the kernel refuses), and then

- the calls that need that family run as plain MLX ops, with right results;
- can_use_fused says (False, reason), the reason naming the family and the
  compiler's message; force_fused=True raises it;
- one RuntimeWarning says so, once a process;
- the other families stay fused.

Each case runs in a fresh process: outcomes are kept for the process."""

import json
import os
import subprocess
import sys
import textwrap

import mlx.core as mx
import pytest

from conftest import DEVICES as TEST_DEVICES

DEVICES = ["cpu" if d == mx.cpu else "gpu" for d in TEST_DEVICES]

CHILD = textwrap.dedent(
    r"""
    import json, sys, warnings
    import mlx.core as mx
    import numpy as np
    import mlx_fused_attn as fa

    device = mx.cpu if sys.argv[1] == "cpu" else mx.gpu
    mx.set_default_device(device)
    result = {}
    q = mx.random.normal((2, 4, 40, 64), key=mx.random.key(0)).astype(mx.float16)
    k = mx.random.normal((2, 2, 70, 64), key=mx.random.key(1)).astype(mx.float16)
    v = mx.random.normal((2, 2, 70, 64), key=mx.random.key(2)).astype(mx.float16)
    x = mx.random.normal((1, 50, 4, 32), key=mx.random.key(3)).astype(mx.float16)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result["attention"] = fa.can_use_fused(q, k, v, scale=0.125, mask="causal")
        outs = [fa.scaled_dot_product_attention(q, k, v, scale=0.125, mask="causal")
                for _ in range(3)]
        ref = mx.fast.scaled_dot_product_attention(
            q.astype(mx.float32), k.astype(mx.float32), v.astype(mx.float32),
            scale=0.125, mask="causal", stream=mx.cpu)
        result["attention_err"] = max(
            float(mx.abs(o.astype(mx.float32) - ref).max()) for o in outs)
        result["neighborhood"] = fa.neighborhood_can_use_fused(x, x, x, 7)
        na = fa.neighborhood_attention(x, x, x, 7)
        na_ref = fa.neighborhood_attention(
            x.astype(mx.float32), x.astype(mx.float32), x.astype(mx.float32), 7,
            stream=mx.cpu)
        result["neighborhood_err"] = float(mx.abs(na.astype(mx.float32) - na_ref).max())
        try:
            fa.scaled_dot_product_attention(
                q, k, v, scale=0.125, mask="causal", force_fused=True)
            result["forced"] = ""
        except ValueError as e:
            result["forced"] = str(e)
    # The references above ran on the CPU, where the hook breaks the family
    # too: keep the warnings about the device under test.
    result["warnings"] = [
        str(w.message) for w in caught
        if w.category is RuntimeWarning
        and (" on CPU " in str(w.message)) == (device == mx.cpu)
    ]
    result["status"] = fa.kernel_status()
    print(json.dumps(result))
    """
)


def run_child(device, broken):
    env = dict(os.environ)
    env.pop("MLX_FUSED_ATTN_BREAK_FAMILY", None)
    if broken:
        env["MLX_FUSED_ATTN_BREAK_FAMILY"] = broken
    r = subprocess.run(
        [sys.executable, "-c", CHILD, device], env=env, capture_output=True,
        text=True, timeout=900,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("device", DEVICES)
def test_unbroken_families_run_fused(device):
    r = run_child(device, None)
    assert r["attention"][0], r["attention"]
    assert r["neighborhood"][0], r["neighborhood"]
    assert r["warnings"] == []
    assert all(s["reason"] == "" for s in r["status"]), r["status"]
    assert r["attention_err"] < 1e-2 and r["neighborhood_err"] < 1e-2


@pytest.mark.parametrize("device", DEVICES)
def test_broken_attention_falls_back_and_neighborhood_stays_fused(device):
    r = run_child(device, "attention")
    ok, reason = r["attention"]
    assert not ok
    assert "attention kernel family is unavailable" in reason, reason
    assert "MLX_FUSED_ATTN_BREAK_FAMILY" in reason, reason
    # The fallback's answer is right.
    assert r["attention_err"] < 1e-2
    assert reason in r["forced"], r["forced"]
    # Said once, however many calls.
    assert len(r["warnings"]) == 1, r["warnings"]
    assert "attention kernels cannot run" in r["warnings"][0]
    assert r["neighborhood"][0], r["neighborhood"]
    assert r["neighborhood_err"] < 1e-2
    failed = {s["family"] for s in r["status"] if s["reason"]}
    assert failed == {"attention"}, r["status"]


@pytest.mark.parametrize("device", DEVICES)
def test_broken_neighborhood_falls_back_and_attention_stays_fused(device):
    r = run_child(device, "neighborhood")
    ok, reason = r["neighborhood"]
    assert not ok
    assert "neighborhood kernel family is unavailable" in reason, reason
    assert r["neighborhood_err"] < 1e-2
    assert len(r["warnings"]) == 1, r["warnings"]
    assert r["attention"][0], r["attention"]
    assert r["attention_err"] < 1e-2


@pytest.mark.skipif("gpu" not in DEVICES, reason="needs a GPU: the copy family is GPU-only")
def test_broken_copy_family_takes_its_users_down_safely():
    r = run_child("gpu", "strided_copy")
    ok, reason = r["attention"]
    assert not ok and "strided_copy kernel family is unavailable" in reason, reason
    assert r["attention_err"] < 1e-2 and r["neighborhood_err"] < 1e-2



GRAD_CHILD = textwrap.dedent(
    r"""
    import json
    import mlx.core as mx
    import mlx_fused_attn as fa

    mx.set_default_device(mx.cpu)
    q = mx.random.normal((1, 2, 24, 64), key=mx.random.key(0))
    k = mx.random.normal((1, 2, 40, 64), key=mx.random.key(1))
    v = mx.random.normal((1, 2, 40, 64), key=mx.random.key(2))
    want = mx.grad(lambda q: mx.fast.scaled_dot_product_attention(
        q, k, v, scale=0.125, mask="causal").sum())(q)

    def gradient(force_fused, return_lse):
        def loss(q):
            out = fa.scaled_dot_product_attention(
                q, k, v, scale=0.125, mask="causal", force_fused=force_fused,
                return_lse=return_lse)
            # The LSE's cotangent is zero: the output's gradient alone.
            return (out[0].sum() + 0 * out[1].sum()) if return_lse else out.sum()
        g = mx.grad(loss)(q)
        return float(mx.abs(g - want).max())

    result = {"forward": fa.can_use_fused(q, k, v, scale=0.125, mask="causal")}
    for name, return_lse in (("grad", False), ("grad_lse", True)):
        result[name + "_plain_err"] = gradient(False, return_lse)
        try:
            result[name + "_forced_err"] = gradient(True, return_lse)
            result[name] = ""
        except ValueError as e:
            result[name] = str(e)
    print(json.dumps(result))
    """
)


def run_grad_child(broken):
    env = dict(os.environ)
    env.pop("MLX_FUSED_ATTN_BREAK_FAMILY", None)
    if broken:
        env["MLX_FUSED_ATTN_BREAK_FAMILY"] = broken
    r = subprocess.run(
        [sys.executable, "-c", GRAD_CHILD], env=env, capture_output=True, text=True, timeout=900
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("broken", [None, "attention_backward"])
def test_force_fused_gradient_raises_where_no_fused_backward_runs(broken):
    """force_fused=True holds for the gradient too: with the backward's
    family broken (the forward's still runs), the forced call's forward runs
    fused and its gradient raises the reason, with return_lse or without;
    unforced, the gradient is plain ops, right. Unbroken, the forced
    gradient runs fused and is right."""
    r = run_grad_child(broken)
    assert r["forward"][0], r["forward"]
    for name in ("grad", "grad_lse"):
        assert r[name + "_plain_err"] < 1e-4, r
        if broken:
            assert "force_fused=True but no fused backward runs" in r[name], r[name]
            assert "attention_backward kernel family is unavailable" in r[name], r[name]
        else:
            assert r[name] == "" and r[name + "_forced_err"] < 1e-4, r
