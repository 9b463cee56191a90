"""Shared helpers: a float64 reference with mx.fast's exact semantics, the
FlashAttention tolerance rule, and the devices to test on."""

import os

# Every kernel fills its output with NaN before running, so an element it
# fails to write fails the comparison (read once, at the first call).
os.environ.setdefault("MLX_FUSED_ATTN_POISON", "1")
# MLX's CUDA backend multiplies float32 matrices in TF32 unless told not to;
# the references and the fallback path are meant to be float32.
os.environ.setdefault("MLX_ENABLE_TF32", "0")

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402



def _test_devices():
    """The devices MLX has, less those MLX_FUSED_ATTN_TEST_DEVICES leaves out
    (comma-separated cpu, gpu; default both). `cpu` keeps the tests off a GPU
    MLX reports but the kernels cannot use: a hosted macOS runner is a VM
    whose Metal device has no simdgroup matrices. Without the GPU, the CPU is
    made the default device too, for the calls that name no stream."""
    names = os.environ.get("MLX_FUSED_ATTN_TEST_DEVICES", "cpu,gpu").split(",")
    unknown = set(names) - {"cpu", "gpu"}
    if unknown:
        raise ValueError(f"MLX_FUSED_ATTN_TEST_DEVICES: unknown device(s) {sorted(unknown)}")
    known = ((mx.cpu, "cpu"), (mx.gpu, "gpu"))
    devices = [d for d, name in known if name in names and mx.is_available(d)]
    if mx.gpu not in devices:
        mx.set_default_device(mx.cpu)
    return devices


DEVICES = _test_devices()
DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32}
# Error floors per dtype, for outputs of magnitude ~1: a few units in the last
# place of the dtype (the fused kernel rounds once, on the store).
FLOOR = {mx.float16: 2e-3, mx.bfloat16: 1.6e-2, mx.float32: 2e-5}
SWEEP = int(os.environ.get("MLX_FUSED_ATTN_SWEEP", "40"))


def device_params():
    return pytest.mark.parametrize(
        "device", DEVICES, ids=[("cpu" if d == mx.cpu else "gpu") for d in DEVICES]
    )


def to_np(x):
    return np.array(x.astype(mx.float32)).astype(np.float64)


def reference(q, k, v, scale, mask=None, sinks=None):
    """softmax(scale q k^T + mask) v in float64, as mx.fast defines it: a
    boolean or causal mask replaces scores with finfo(dtype).min (so a row
    masked everywhere averages v), sinks are unscaled extra logits."""
    dt = q.dtype
    qn, kn, vn = to_np(q), to_np(k), to_np(v)
    B, Hq, Lq, _ = qn.shape
    Hk, Lk = kn.shape[1], kn.shape[2]
    g = Hq // Hk
    kn = np.repeat(kn, g, axis=1)
    vn = np.repeat(vn, g, axis=1)
    s = scale * np.einsum("bhqd,bhkd->bhqk", qn, kn)
    lowest = float(np.finfo(np.float16).min) if dt == mx.float16 else float(
        np.finfo(np.float32).min
    )
    if isinstance(mask, str):
        allowed = np.arange(Lq)[:, None] + (Lk - Lq) >= np.arange(Lk)[None, :]
        s = np.where(allowed, s, lowest)
    elif mask is not None and mask.dtype == mx.bool_:
        s = np.where(np.broadcast_to(np.array(mask), s.shape), s, lowest)
    elif mask is not None:
        s = s + np.broadcast_to(to_np(mask), s.shape)
    if sinks is not None:
        sk = np.broadcast_to(to_np(sinks)[None, :, None, None], (B, Hq, Lq, 1))
        s = np.concatenate([sk, s], axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        m = s.max(axis=-1, keepdims=True)
        p = np.exp(s - m)
        p = p / p.sum(axis=-1, keepdims=True)
    if sinks is not None:
        p = p[..., 1:]
    return np.einsum("bhqk,bhkd->bhqd", p, vn)


def assert_close(out, q, k, v, scale, mask=None, sinks=None, what=""):
    """The FlashAttention rule: the fused error is at most twice that of the
    same attention computed naively in the input dtype (mx.fast on the CPU,
    which runs unfused there), plus a per-dtype floor. NaN must match."""
    ref = reference(q, k, v, scale, mask, sinks)
    naive = mx.fast.scaled_dot_product_attention(
        q, k, v, scale=scale, mask=mask, sinks=sinks, stream=mx.cpu
    )
    got = to_np(out)
    assert got.shape == ref.shape, what
    nan_ref = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(got), nan_ref, err_msg=f"NaN pattern {what}")
    ok = ~nan_ref
    err = np.abs(got - ref)[ok].max(initial=0.0)
    naive_err = np.abs(to_np(naive) - ref)[ok].max(initial=0.0)
    bound = 2 * naive_err + FLOOR[q.dtype] * max(1.0, np.abs(ref[ok]).max(initial=0.0))
    assert err <= bound, f"{what}: max error {err:.3g} > bound {bound:.3g} (naive {naive_err:.3g})"


def rand(shape, dtype, seed, scale=1.0):
    key = mx.random.key(seed)
    return (scale * mx.random.normal(shape, key=key)).astype(dtype)
