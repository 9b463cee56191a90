"""scaled_dot_product_attention(..., return_lse=True), merge_attention and
packed variable-length batches (varlen_attention, pack_padded,
unpack_padded), on every device, against float64 references: NumPy for
values, MLX float64 ops (on the CPU) for gradients."""

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import FLOOR, assert_close, device_params, rand, reference, to_np

# (dtype, B, H_q, H_kv, L_q, L_k, D, D_v, mask, sinks): every mask kind,
# GQA, L_q != L_k, sinks, a row a bool mask hides everywhere.
CASES = [
    (mx.float32, 2, 4, 2, 33, 65, 32, 32, "causal", False),
    (mx.float16, 1, 4, 4, 65, 65, 64, 64, None, True),
    (mx.float32, 1, 6, 2, 17, 40, 32, 48, "bool", False),
    (mx.bfloat16, 2, 2, 1, 48, 127, 64, 64, "additive", True),
    (mx.float32, 1, 2, 2, 70, 30, 16, 16, "causal", True),
]
IDS = [f"{str(c[0]).split('.')[-1]}-Hq{c[2]}/{c[3]}-Lq{c[4]}-Lk{c[5]}-{c[8]}-sinks{c[9]}" for c in CASES]


def make(dtype, B, Hq, Hk, Lq, Lk, D, Dv, mask, sinks, seed):
    q = rand((B, Hq, Lq, D), dtype, seed)
    k = rand((B, Hk, Lk, D), dtype, seed + 1)
    v = rand((B, Hk, Lk, Dv), dtype, seed + 2)
    key = mx.random.key(seed + 3)
    if mask == "bool":
        mask = mx.random.uniform(shape=(B, 1, Lq, Lk), key=key) > 0.4
        mask[:, :, 3, :] = False  # a row that sees no key: LSE -inf
    elif mask == "additive":
        mask = mx.random.normal((1, Hq, Lq, Lk), key=key).astype(dtype)
    s = rand((Hq,), dtype, seed + 4) if sinks else None
    return q, k, v, mask, s


def scores64(q, k, scale, mask, sinks):
    """The scaled, masked scores in float64 (-inf where a mask hides a key),
    with the sinks' logits as a first column: what the LSE sums over."""
    qn, kn = to_np(q), to_np(k)
    kn = np.repeat(kn, q.shape[1] // k.shape[1], axis=1)
    s = scale * np.einsum("bhqd,bhkd->bhqk", qn, kn)
    Lq, Lk = s.shape[-2:]
    if isinstance(mask, str):
        s = np.where(np.arange(Lk)[None, :] <= np.arange(Lq)[:, None] + Lk - Lq, s, -np.inf)
    elif mask is not None and mask.dtype == mx.bool_:
        s = np.where(np.broadcast_to(np.array(mask), s.shape), s, -np.inf)
    elif mask is not None:
        s = s + np.broadcast_to(to_np(mask), s.shape)
    if sinks is not None:
        col = np.broadcast_to(to_np(sinks)[None, :, None, None], s.shape[:-1] + (1,))
        s = np.concatenate([col, s], axis=-1)
    return s


def lse64(q, k, scale, mask=None, sinks=None):
    s = scores64(q, k, scale, mask, sinks)
    top = s.max(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.exp(s - np.where(np.isfinite(top), top, 0)).sum(-1)) + np.where(
            np.isfinite(top[..., 0]), top[..., 0], 0
        )
    return np.where(np.isfinite(top[..., 0]), out, -np.inf)


def plain64(q, k, v, scale, mask, sinks):
    """(out, lse) as float64 MLX ops, differentiable: the gradient reference."""
    g = q.shape[1] // k.shape[1]
    k, v = mx.repeat(k, g, axis=1), mx.repeat(v, g, axis=1)
    s = scale * (q @ k.swapaxes(-1, -2))
    Lq, Lk = s.shape[-2:]
    if isinstance(mask, str):
        s = mx.where(mx.arange(Lk)[None, :] <= mx.arange(Lq)[:, None] + Lk - Lq, s, -np.inf)
    elif mask is not None and mask.dtype == mx.bool_:
        s = mx.where(mask, s, -np.inf)
    elif mask is not None:
        s = s + mask.astype(mx.float64)
    if sinks is not None:
        s = mx.concatenate([mx.broadcast_to(sinks[None, :, None, None], s.shape[:-1] + (1,)), s], -1)
    lse = mx.logsumexp(s, axis=-1)
    p = mx.exp(s - lse[..., None])
    if sinks is not None:
        p = p[..., 1:]
    return p @ v, lse


@device_params()
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_return_lse_matches_float64(case, device):
    q, k, v, mask, sinks = make(*case, seed=11)
    scale = q.shape[-1] ** -0.5
    out, lse = fa.scaled_dot_product_attention(
        q, k, v, scale=scale, mask=mask, sinks=sinks, return_lse=True, stream=device
    )
    assert lse.dtype == mx.float32 and lse.shape == q.shape[:3]
    plain = fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask, sinks=sinks, stream=device)
    np.testing.assert_array_equal(np.array(out.astype(mx.float32)), np.array(plain.astype(mx.float32)))
    assert_close(out, q, k, v, scale, mask, sinks, what="out")
    ref = lse64(q, k, scale, mask, sinks)
    got = np.array(lse).astype(np.float64)
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(ref))
    ok = np.isfinite(ref)
    # The LSE is float32 arithmetic on inputs rounded to the dtype: the
    # scores' rounding bounds its error.
    tol = 1e-5 if q.dtype == mx.float32 else 1e-2
    assert np.abs(got[ok] - ref[ok]).max() <= tol * max(1.0, np.abs(ref[ok]).max())


@device_params()
@pytest.mark.parametrize(
    "case", [c for c in CASES if c[0] == mx.float32] + [CASES[3]], ids=lambda c: str(c[8])
)
def test_gradients_of_out_and_lse(case, device):
    q, k, v, mask, sinks = make(*case, seed=23)
    if isinstance(mask, mx.array) and mask.dtype == mx.bool_:
        # The float64 reference has no value for a row that sees no key.
        mask[:, :, 3, 0] = True
    scale = q.shape[-1] ** -0.5
    w = mx.random.normal((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), key=mx.random.key(5))
    u = mx.random.normal(q.shape[:3], key=mx.random.key(6))
    args = [q, k, v] + ([sinks] if sinks is not None else [])

    def loss(q, k, v, *s):
        out, lse = fa.scaled_dot_product_attention(
            q, k, v, scale=scale, mask=mask, sinks=s[0] if s else None, return_lse=True, stream=device
        )
        lse = mx.where(mx.isfinite(lse), lse, 0.0)
        return (out.astype(mx.float32) * w).sum() + (lse * u).sum()

    def loss_plain(dt):
        def f(q, k, v, *s):
            m = mask.astype(dt) if isinstance(mask, mx.array) and mask.dtype != mx.bool_ else mask
            out, lse = plain64(q, k, v, scale, m, s[0] if s else None)
            lse = mx.where(mx.isfinite(lse), lse, 0.0).astype(mx.float32)
            return (out.astype(mx.float32) * w).sum() + (lse * u).sum()

        return f

    argnums = tuple(range(len(args)))
    got = mx.grad(loss, argnums=argnums)(*args)
    with mx.stream(mx.cpu):
        ref = mx.grad(loss_plain(mx.float64), argnums=argnums)(*[a.astype(mx.float64) for a in args])
        # The FlashAttention rule: at most twice the error of the same
        # gradient as plain ops in the input dtype, plus a floor.
        naive = mx.grad(loss_plain(q.dtype), argnums=argnums)(*args)
    for name, g, n, r in zip("q k v sinks".split(), got, naive, ref):
        r = np.array(r)
        err = np.abs(to_np(g) - r).max()
        bound = 2 * np.abs(to_np(n) - r).max() + FLOOR[q.dtype] * max(1.0, np.abs(r).max())
        assert err <= bound, f"d{name}: {err:.3g} > {bound:.3g}"


@device_params()
@pytest.mark.parametrize("mask", [None, "causal", "bool"])
def test_merge_of_disjoint_key_sets_is_the_whole(mask, device):
    dtype, Lq, Lk = mx.float32, 40, 97
    q, k, v = rand((1, 4, Lq, 32), dtype, 1), rand((1, 2, Lk, 32), dtype, 2), rand((1, 2, Lk, 32), dtype, 3)
    scale = 32**-0.5
    if mask == "causal":
        full = mx.arange(Lk)[None, :] <= mx.arange(Lq)[:, None] + Lk - Lq
    elif mask == "bool":
        full = mx.random.uniform(shape=(Lq, Lk), key=mx.random.key(4)) > 0.5
    else:
        full = None
    cuts = [0, 30, 31, 70, Lk]

    def parts(q, k, v):
        outs, lses = [], []
        for a, b in zip(cuts, cuts[1:]):
            m = None if full is None else full[:, a:b]
            o, lse = fa.scaled_dot_product_attention(
                q, k[:, :, a:b], v[:, :, a:b], scale=scale, mask=m, return_lse=True, stream=device
            )
            outs.append(o)
            lses.append(lse)
        return fa.merge_attention(outs, lses)

    out, lse = parts(q, k, v)
    whole, whole_lse = fa.scaled_dot_product_attention(
        q, k, v, scale=scale, mask=full, return_lse=True, stream=device
    )
    seen = np.isfinite(np.array(whole_lse))
    np.testing.assert_allclose(np.array(lse)[seen], np.array(whole_lse)[seen], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(out)[seen], np.array(whole)[seen], rtol=1e-4, atol=1e-5)
    assert np.all(np.isneginf(np.array(lse)[~seen])) and np.all(np.array(out)[~seen] == 0)
    if mask != "bool":
        w = mx.random.normal(out.shape, key=mx.random.key(9))
        g = mx.grad(lambda q, k, v: (parts(q, k, v)[0] * w).sum(), argnums=(0, 1, 2))(q, k, v)
        def whole_loss(q, k, v):
            out = fa.scaled_dot_product_attention(q, k, v, scale=scale, mask=full, stream=device)
            return (out * w).sum()

        ref = mx.grad(whole_loss, argnums=(0, 1, 2))(q, k, v)
        for a, b in zip(g, ref):
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-4, atol=1e-4)


def test_merge_rejects_mismatched_partials():
    o, lse = mx.zeros((1, 2, 3, 4)), mx.zeros((1, 2, 3))
    with pytest.raises(ValueError, match="same length"):
        fa.merge_attention([o, o], [lse])
    with pytest.raises(ValueError, match="shape"):
        fa.merge_attention([o, mx.zeros((1, 2, 4, 4))], [lse, lse])
    with pytest.raises(TypeError, match="mlx.core.array"):
        fa.merge_attention([o], [np.zeros((1, 2, 3))])


def varlen_reference(q, k, v, cq, ck, scale, causal):
    out = []
    for a, b, c, d in zip(cq, cq[1:], ck, ck[1:]):
        if b > a:
            mask = "causal" if causal else None
            out.append(reference(q[:, :, a:b], k[:, :, c:d], v[:, :, c:d], scale, mask))
    return np.concatenate(out, axis=2)


@device_params()
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16])
def test_varlen_matches_each_sequence(causal, dtype, device):
    cq = [0, 5, 5, 22, 55, 56]
    ck = [0, 9, 12, 29, 62, 64]  # L_k >= L_q, and one sequence of keys only
    q = rand((1, 4, cq[-1], 32), dtype, 31)
    k, v = rand((1, 2, ck[-1], 32), dtype, 32), rand((1, 2, ck[-1], 32), dtype, 33)
    scale = 32**-0.5
    out, lse = fa.varlen_attention(
        q, k, v, mx.array(cq, dtype=mx.int32), mx.array(ck, dtype=mx.int32), scale=scale,
        causal=causal, return_lse=True, stream=device,
    )  # fmt: skip
    ref = varlen_reference(q, k, v, cq, ck, scale, causal)
    err = np.abs(to_np(out) - ref).max()
    assert err <= 2 * FLOOR[dtype] * max(1.0, np.abs(ref).max()), err
    for a, b, c, d in zip(cq, cq[1:], ck, ck[1:]):
        if b > a:
            ref_lse = lse64(q[:, :, a:b], k[:, :, c:d], scale, "causal" if causal else None)
            tol = 1e-5 if dtype == mx.float32 else 1e-2
            np.testing.assert_allclose(np.array(lse[:, :, a:b]), ref_lse, atol=tol * 10, rtol=tol)


@device_params()
def test_varlen_gradients(device):
    cu = [0, 7, 40, 41, 80]
    q, k, v = (rand((1, 2, 80, 16), mx.float32, s) for s in (41, 42, 43))
    w = mx.random.normal((1, 2, 80, 16), key=mx.random.key(44))

    def loss(q, k, v):
        return (fa.varlen_attention(q, k, v, cu, scale=0.25, causal=True, stream=device) * w).sum()

    def loss64(q, k, v):
        outs = [
            plain64(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], 0.25, "causal", None)[0]
            for a, b in zip(cu, cu[1:])
        ]
        return (mx.concatenate(outs, axis=2) * w.astype(mx.float64)).sum()

    got = mx.grad(loss, argnums=(0, 1, 2))(q, k, v)
    with mx.stream(mx.cpu):
        ref = mx.grad(loss64, argnums=(0, 1, 2))(*(x.astype(mx.float64) for x in (q, k, v)))
    for g, r in zip(got, ref):
        np.testing.assert_allclose(np.array(g), np.array(r), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("padding", ["right", "left"])
def test_pack_unpack_round_trip_and_varlen_equals_padded_batch(padding):
    B, H, L, D = 3, 2, 12, 16
    lengths = [12, 4, 9]
    x = rand((B, H, L, D), mx.float32, 51)
    packed, cu = fa.pack_padded(x, lengths, padding=padding)
    assert packed.shape == (1, H, sum(lengths), D) and cu.tolist() == [0, 12, 16, 25]
    back = fa.unpack_padded(packed, cu, L, padding=padding)
    real = np.zeros((B, 1, L, 1), dtype=bool)
    for b, n in enumerate(lengths):
        real[b, :, slice(0, n) if padding == "right" else slice(L - n, L)] = True
    np.testing.assert_array_equal(np.array(back), np.where(real, np.array(x), 0))
    # Attention over the packed batch is the padded batch's with the
    # padding keys masked, on its real rows.
    packed_out = fa.varlen_attention(packed, packed, packed, cu, scale=0.25)
    out = fa.unpack_padded(packed_out, cu, L, padding=padding)
    keys = mx.array(real[:, :, None, :, 0])  # [B, 1, 1, L]
    ref = fa.scaled_dot_product_attention(x, x, x, scale=0.25, mask=keys)
    np.testing.assert_allclose(np.where(real, np.array(out), 0), np.where(real, np.array(ref), 0), atol=1e-5)


def test_varlen_rejects_bad_offsets():
    q = mx.zeros((1, 2, 10, 8))
    with pytest.raises(ValueError, match="end at the packed length 10"):
        fa.varlen_attention(q, q, q, [0, 4, 9], scale=1.0)
    with pytest.raises(ValueError, match="never decrease"):
        fa.varlen_attention(q, q, q, [0, 6, 4, 10], scale=1.0)
    with pytest.raises(ValueError, match="as many sequences"):
        fa.varlen_attention(q, q, q, [0, 10], [0, 5, 10], scale=1.0)
    with pytest.raises(ValueError, match="queries and no keys"):
        fa.varlen_attention(q, q, q, [0, 5, 10], [0, 10, 10], scale=1.0)
    with pytest.raises(ValueError, match=r"\[1, H, total, D\]"):
        fa.varlen_attention(mx.zeros((2, 2, 10, 8)), q, q, [0, 10], scale=1.0)
    with pytest.raises(TypeError, match="integer"):
        fa.varlen_attention(q, q, q, mx.array([0.0, 10.0]), scale=1.0)
    with pytest.raises(TypeError, match="return_lse must be a bool"):
        fa.scaled_dot_product_attention(q, q, q, scale=1.0, return_lse=1)


def test_return_lse_under_vmap_and_compile():
    q = rand((3, 1, 2, 17, 32), mx.float32, 61)
    k, v = (rand((3, 1, 2, 20, 32), mx.float32, s) for s in (62, 63))

    def f(q, k, v):
        return fa.scaled_dot_product_attention(q, k, v, scale=0.2, mask="causal", return_lse=True)

    one = [f(q[i], k[i], v[i]) for i in range(3)]
    out, lse = mx.vmap(f)(q, k, v)
    np.testing.assert_array_equal(np.array(out), np.array(mx.stack([o for o, _ in one])))
    np.testing.assert_array_equal(np.array(lse), np.array(mx.stack([s for _, s in one])))
    out, lse = mx.compile(f)(q[0], k[0], v[0])
    np.testing.assert_array_equal(np.array(out), np.array(one[0][0]))
    np.testing.assert_array_equal(np.array(lse), np.array(one[0][1]))
