"""quantized_scaled_dot_product_attention against a float64 reference of
dequantize-then-attend: every code width, group size and dtype, head dims
32 to 256, each mask kind, GQA, sinks, decode (packed GQA, split keys) and
prefill, within the float path's tolerance in the same dtype; mlx-lm's own
function; the errors; no gradients; vmap, compile, strided caches."""

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import DTYPES, FLOOR, SWEEP, device_params, reference, to_np

BITS = [2, 3, 4, 5, 6, 8]
GROUPS = [32, 64, 128]
HEAD_DIMS = [32, 64, 128, 256]
MASKS = ["none", "causal", "bool", "additive"]


def quantized(x, group_size, bits):
    return mx.quantize(x, group_size=group_size, bits=bits)


def dequantized(qx, group_size, bits):
    """The values the kernel computes from the codes: scale * code + bias in
    float32 (exact for float16 and bfloat16 scales and biases)."""
    return mx.dequantize(*qx, group_size=group_size, bits=bits, dtype=mx.float32)


def make_mask(kind, rng, B, Hq, Lq, Lk, dtype):
    return {
        "none": None,
        "causal": "causal",
        # One row hides every key: it averages v, as in mx.fast.
        "bool": mx.array(np.concatenate(
            [rng.random((B, 1, Lq - 1, Lk)) > 0.3, np.zeros((B, 1, 1, Lk), bool)], axis=2)),
        "additive": mx.array(rng.standard_normal((1, Hq, Lq, Lk), np.float32)).astype(dtype),
    }[kind]  # fmt: skip


def assert_quantized_close(out, q, qk, qv, group_size, bits, scale, mask, sinks, what):
    """The FlashAttention rule against dequantize-then-attend: at most twice
    the error of the float path in the input dtype (mx.fast on the CPU over
    K and V dequantized to that dtype), plus the dtype's floor."""
    k32, v32 = dequantized(qk, group_size, bits), dequantized(qv, group_size, bits)
    ref = reference(q, k32, v32, scale, mask, sinks)
    dt = q.dtype
    naive = mx.fast.scaled_dot_product_attention(
        q, k32.astype(dt), v32.astype(dt), scale=scale, mask=mask, sinks=sinks, stream=mx.cpu
    )
    got = to_np(out)
    assert got.shape == ref.shape, what
    nan_ref = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(got), nan_ref, err_msg=f"NaN pattern {what}")
    ok = ~nan_ref
    err = np.abs(got - ref)[ok].max(initial=0.0)
    naive_err = np.abs(to_np(naive) - ref)[ok].max(initial=0.0)
    bound = 2 * naive_err + FLOOR[dt] * max(1.0, np.abs(ref[ok]).max(initial=0.0))
    assert err <= bound, f"{what}: max error {err:.3g} > bound {bound:.3g} (naive {naive_err:.3g})"


def run_case(device, rng, bits, group_size, D, dtype, kind, B, Hq, Hk, Lq, Lk, sinks, what,
             gpu_kernel=False):
    """One call on `device` against dequantize-then-attend; a kernel must run
    it on the CPU, and on a GPU too where `gpu_kernel`."""
    q = mx.array(rng.standard_normal((B, Hq, Lq, D), np.float32)).astype(dtype)
    k = mx.array(rng.standard_normal((B, Hk, Lk, D), np.float32)).astype(dtype)
    v = mx.array(rng.standard_normal((B, Hk, Lk, D), np.float32)).astype(dtype)
    qk, qv = quantized(k, group_size, bits), quantized(v, group_size, bits)
    mask = make_mask(kind, rng, B, Hq, Lq, Lk, dtype)
    s = mx.array(rng.standard_normal(Hq, np.float32)).astype(dtype) if sinks else None
    scale = D**-0.5
    if device == mx.cpu or gpu_kernel:  # the CPU kernel takes every call
        assert fa.quantized_can_use_fused(
            q, qk, qv, scale, mask, group_size, bits, sinks=s, stream=device
        ) == (True, ""), what
    out = fa.quantized_scaled_dot_product_attention(
        q, qk, qv, scale, mask, group_size, bits, sinks=s, stream=device
    )
    assert out.dtype == dtype, what
    assert_quantized_close(out, q, qk, qv, group_size, bits, scale, mask, s, what)


# Every (bits, group size) pair once; the other axes rotate through the
# pairs so that each of their values meets several widths: decode with GQA
# packed (L_q = 1), a few queries, and prefill past one query block. The
# head dims rotate from an offset at which the widths with GPU kernels (4
# and 8 bits) meet each of them.
GRID = [(bits, group) for bits in BITS for group in GROUPS]


@device_params()
@pytest.mark.parametrize("index", range(len(GRID)), ids=[f"b{b}g{g}" for b, g in GRID])
def test_grid_matches_dequantize_then_attend(device, index):
    bits, group = GRID[index]
    rng = np.random.default_rng(index)
    dims = [d for d in HEAD_DIMS if d % group == 0]
    D = dims[(index + 2) % len(dims)]
    dtype = list(DTYPES.values())[index % 3]
    kind = MASKS[index % 4]
    Hk = 1 + index % 2
    Hq = Hk * [1, 2, 4][(index // 2) % 3]
    Lq = [1, 5, 70][index % 3]
    Lk = [33, 129, 300][(index // 3) % 3] + (Lq if kind == "causal" else 0)
    sinks = index % 5 == 0
    what = (f"bits={bits} group={group} D={D} {dtype} mask={kind} Hq={Hq} Hk={Hk} "
            f"Lq={Lq} Lk={Lk} sinks={sinks}")  # fmt: skip
    run_case(device, rng, bits, group, D, dtype, kind, 2, Hq, Hk, Lq, Lk, sinks, what)


@device_params()
@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("Hq", [1, 8])
def test_decode_with_split_keys(device, kind, Hq):
    """Few (batch, head) rows and many keys: the CPU kernel splits the keys
    across its threads and merges the splits by their log-sum-exp; sinks
    count once, in the first split."""
    rng = np.random.default_rng(Hq)
    Lk = 5000 + 37
    what = f"split keys mask={kind} Hq={Hq}"
    run_case(device, rng, 4, 64, 128, mx.float16, kind, 1, Hq, 1, 1, Lk, True, what)


@device_params()
def test_long_decode_with_packed_gqa(device):
    """The decode the GPU goal is set on (B=1, 32 query heads on 8 K/V
    heads, D=128, 4-bit groups of 64, bf16), at 32K keys and a ragged last
    block: on a GPU many splits of many blocks each, the next block in
    registers under each block's products, and three of each threadgroup's
    four warps without a row (quantized_kv_target.h)."""
    rng = np.random.default_rng(7)
    run_case(device, rng, 4, 64, 128, mx.bfloat16, "none", 1, 32, 8, 1, 32768 + 37, False,
             "long decode")


@device_params()
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("Lq", [1, 70])
def test_head_dim_32_runs_fused(device, bits, Lq):
    """D = 32 is one group of 32 a row (a row of words is 16 bytes at 4
    bits, 32 at 8): a kernel on every device at the widths mlx-lm's
    QuantizedKVCache takes, for decode with packed GQA and a causal prefill
    past one query block (test_mlx_lm.py's llama-gqa has D = 32)."""
    rng = np.random.default_rng(32 + bits + Lq)
    what = f"D=32 bits={bits} Lq={Lq}"
    run_case(device, rng, bits, 32, 32, mx.float16, "causal", 2, 4, 2, Lq, 129 + Lq, False, what,
             gpu_kernel=True)  # fmt: skip


@device_params()
@pytest.mark.parametrize("case", range(SWEEP // 2))
def test_random_case(device, case):
    """A seeded random sweep (MLX_FUSED_ATTN_SWEEP sizes it; each case
    reseeds from its index, and a failure names it)."""
    rng = np.random.default_rng(1000 + case)
    bits = int(rng.choice(BITS))
    group = int(rng.choice(GROUPS))
    D = int(rng.choice([d for d in [32, 64, 96, 128, 192, 256] if d % group == 0]))
    dtype = list(DTYPES.values())[rng.integers(3)]
    kind = str(rng.choice(MASKS))
    B = int(rng.integers(1, 3))
    Hk = int(rng.integers(1, 3))
    Hq = Hk * int(rng.choice([1, 2, 4]))
    Lq = int(rng.choice([1, 1, 3, 64, 65, 127]))
    Lk = int(rng.choice([1, 31, 64, 65, 300, 1000]))
    sinks = bool(rng.random() < 0.3)
    what = (f"case {case}: bits={bits} group={group} D={D} {dtype} mask={kind} B={B} "
            f"Hq={Hq} Hk={Hk} Lq={Lq} Lk={Lk} sinks={sinks}")  # fmt: skip
    run_case(device, rng, bits, group, D, dtype, kind, B, Hq, Hk, Lq, Lk, sinks, what)


@device_params()
@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("Lq", [1, 9])
def test_mlx_lm_semantics(device, kind, Lq):
    """The result of mlx-lm's own quantized attention, which multiplies the
    queries by the scale in their dtype and quantizes nothing further."""
    base = pytest.importorskip("mlx_lm.models.base")
    rng = np.random.default_rng(7)
    B, Hq, Hk, Lk, D = 2, 8, 2, 100, 64
    q = mx.array(rng.standard_normal((B, Hq, Lq, D), np.float32)).astype(mx.float16)
    k, v = (mx.array(rng.standard_normal((B, Hk, Lk, D), np.float32)).astype(mx.float16)
            for _ in range(2))  # fmt: skip
    qk, qv = quantized(k, 64, 4), quantized(v, 64, 4)
    # mlx-lm broadcasts a 4-D mask over the query heads of a group only with
    # one head.
    mask = make_mask(kind, rng, B, 1, Lq, Lk, mx.float16)
    with mx.stream(mx.cpu):
        # mlx-lm scales its queries in place (`queries *= scale`): give it a copy.
        want = base.quantized_scaled_dot_product_attention(q * 1, qk, qv, D**-0.5, mask, 64, 4)
    got = fa.quantized_scaled_dot_product_attention(q, qk, qv, D**-0.5, mask, 64, 4, stream=device)
    # mlx-lm rounds its scores and probabilities to float16.
    np.testing.assert_allclose(to_np(got), to_np(want), atol=2e-2, rtol=0)


def test_strided_and_sliced_caches():
    """mlx-lm's cache hands out its buffers sliced on the key axis; codes
    whose rows are not contiguous are read through a copy."""
    rng = np.random.default_rng(3)
    B, Hq, Hk, L, D, n = 1, 4, 2, 256, 128, 200
    k, v = (mx.array(rng.standard_normal((B, Hk, L, D), np.float32)) for _ in range(2))
    qk, qv = quantized(k, 64, 4), quantized(v, 64, 4)
    sliced_k = tuple(x[..., :n, :] for x in qk)
    sliced_v = tuple(x[..., :n, :] for x in qv)
    q = mx.array(rng.standard_normal((B, Hq, 3, D), np.float32))
    out = fa.quantized_scaled_dot_product_attention(q, sliced_k, sliced_v, D**-0.5, "causal", 64, 4)
    assert_quantized_close(out, q, sliced_k, sliced_v, 64, 4, D**-0.5, "causal", None, "sliced")
    # Codes with a transposed (non-contiguous) last axis.
    words = mx.swapaxes(mx.contiguous(mx.swapaxes(qk[0], -1, -2)), -1, -2)
    assert words.shape == qk[0].shape
    strided_k = (words, qk[1], qk[2])
    out = fa.quantized_scaled_dot_product_attention(q, strided_k, qv, D**-0.5, None, 64, 4)
    assert_quantized_close(out, q, qk, qv, 64, 4, D**-0.5, None, None, "transposed codes")


def cache(B=1, H=2, L=16, D=64, group_size=64, bits=4):
    return tuple(quantized(mx.random.normal((B, H, L, D)), group_size, bits))


@pytest.mark.parametrize(
    "change, error, words",
    [
        (dict(bits=7), ValueError, "bits must be 2, 3, 4, 5, 6 or 8"),
        (dict(group_size=16), ValueError, "group_size must be 32, 64 or 128"),
        (dict(bits=8), ValueError, "q_keys does not hold rows quantized with group_size=64 and bits=8"),
        (dict(q_keys=cache(D=128)), ValueError, "q_keys hold 128 values a row"),
        (dict(q_keys=cache(L=8)), ValueError, "q_values must have the batch, heads and length of q_keys"),
        (dict(q_keys=cache(H=3), q_values=cache(H=3)), ValueError, "query heads (4) must be a multiple of the key/value heads (3)"),
        (dict(q_values=cache()[:2]), ValueError, "mxfp4, nvfp4 and mxfp8 modes are not supported"),
        (dict(q_keys=mx.zeros((1, 2, 16, 64))), TypeError, "q_keys must be the tuple"),
        (dict(q_keys=(cache()[0].astype(mx.int32),) + cache()[1:]), TypeError, "q_keys[0] must hold the packed codes, uint32"),
        (dict(queries=mx.zeros((1, 4, 3, 64), mx.int32)), TypeError, "queries must be floating-point"),
        (dict(mask=mx.zeros((3, 17), mx.bool_)), ValueError, "mask of shape (3,17) does not broadcast"),
        (dict(mask="full"), ValueError, 'mask must be None, "causal" or an array'),
        (dict(sinks=mx.zeros((3,))), ValueError, "sinks must have shape [4]"),
        (dict(scale=float("nan")), ValueError, "scale must be finite"),
        (dict(bits=True), TypeError, "bits must be an int"),
    ],
)  # fmt: skip
def test_errors_name_the_argument(change, error, words):
    args = dict(queries=mx.zeros((1, 4, 3, 64)), q_keys=cache(), q_values=cache(), scale=0.125,
                mask=None, group_size=64, bits=4)  # fmt: skip
    args.update({k: v for k, v in change.items() if k != "sinks"})
    with pytest.raises(error, match="quantized_scaled_dot_product_attention") as raised:
        fa.quantized_scaled_dot_product_attention(**args, sinks=change.get("sinks"))
    assert words in str(raised.value)
    with pytest.raises(error):
        fa.quantized_can_use_fused(**args, sinks=change.get("sinks"))


@pytest.mark.parametrize("dtype", [mx.float32, mx.float64])
def test_gradients_raise(dtype):
    """Fused (float32) and plain-ops (float64: no CPU kernel) calls alike."""
    qk, qv = cache(), cache()
    q = mx.random.normal((1, 4, 3, 64)).astype(dtype, stream=mx.cpu)  # float64: CPU only

    def f(q):
        return fa.quantized_scaled_dot_product_attention(q, qk, qv, 0.125, None, 64, 4).sum()

    with mx.stream(mx.cpu):
        assert fa.quantized_can_use_fused(q, qk, qv, 0.125, None, 64, 4)[0] == (dtype == mx.float32)
        with pytest.raises(ValueError, match="no gradients: a quantized K/V cache is for inference"):
            mx.grad(f)(q)
        with pytest.raises(ValueError, match="no gradients"):
            mx.jvp(f, [q], [mx.ones_like(q)])


def test_fallback_reason_and_force_fused():
    qk, qv = cache(), cache()
    q = mx.random.normal((1, 4, 3, 64)).astype(mx.float64, stream=mx.cpu)  # CPU only
    with mx.stream(mx.cpu):
        ok, reason = fa.quantized_can_use_fused(q, qk, qv, 0.125, "causal", 64, 4)
        assert not ok and "float16, bfloat16 or float32, not float64" in reason
        with pytest.raises(ValueError, match="force_fused=True but no fused kernel runs"):
            fa.quantized_scaled_dot_product_attention(q, qk, qv, 0.125, "causal", 64, 4,
                                                      force_fused=True)  # fmt: skip
        out = fa.quantized_scaled_dot_product_attention(q, qk, qv, 0.125, "causal", 64, 4)
        assert out.dtype == mx.float64
        assert_quantized_close(out.astype(mx.float32), q.astype(mx.float32), qk, qv, 64, 4,
                               0.125, "causal", None, "fallback")  # fmt: skip


def test_plan_names_the_cpu_kernel():
    """The private plan view (the GPU tests read the CUDA tiles and chunk
    policy from it): on the CPU the kernel without tiles or chunks, decode
    with GQA packed; a fallback's reason as quantized_can_use_fused's."""
    qk, qv = cache(H=2, L=64), cache(H=2, L=64)
    q = mx.random.normal((1, 4, 1, 64))
    plan = fa._ext._quantized_plan(q, qk, qv, 0.125, None, 64, 4, stream=mx.cpu)
    assert plan == {"fused": True, "reason": "", "tiles": {}, "chunks": "float", "key_splits": 1,
                    "packed_gqa": True, "combine_form": ""}  # fmt: skip
    plan = fa._ext._quantized_plan(q.astype(mx.float64, stream=mx.cpu), qk, qv, 0.125, None, 64, 4,
                                   stream=mx.cpu)  # fmt: skip
    assert not plan["fused"] and "not float64" in plan["reason"]
    with pytest.raises(ValueError, match="bits must be 2, 3, 4, 5, 6 or 8"):
        fa._ext._quantized_plan(q, qk, qv, 0.125, None, 64, 7, stream=mx.cpu)


def test_vmap_and_compile():
    rng = np.random.default_rng(5)
    qs = mx.array(rng.standard_normal((3, 1, 4, 2, 64), np.float32))
    ks = [cache() for _ in range(3)]
    stacked = [tuple(mx.stack([c[i] for c in ks]) for i in range(3))]
    qk = stacked[0]

    def f(q, kw, ks, kb):
        return fa.quantized_scaled_dot_product_attention(q, (kw, ks, kb), (kw, ks, kb), 0.125,
                                                         "causal", 64, 4)  # fmt: skip

    with mx.stream(mx.cpu):
        mapped = mx.vmap(f)(qs, *qk)
        for i in range(3):
            one = f(qs[i], *ks[i])
            np.testing.assert_allclose(to_np(mapped[i]), to_np(one), atol=1e-6)
        compiled = mx.compile(f)(qs[0], *ks[0])
        np.testing.assert_allclose(to_np(compiled), to_np(f(qs[0], *ks[0])), atol=1e-6)
