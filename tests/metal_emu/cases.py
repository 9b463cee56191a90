"""One case of an attention-family kernel (the general and the short one) in
the emulator: random inputs, each stored in its own layout with its padding
poisoned, a NaN-poisoned output, the launch, and the check of every output
element against a float64 reference with mx.fast's semantics.

Semantics are those of MLX 0.32.4's mx.fast.scaled_dot_product_attention: a
masked score becomes finfo(dtype).min, so fully masked rows give the mean of
V (or 0 with a sink); sinks are raw logits beside the scaled scores; an all
-inf additive row gives NaN.
"""

from typing import NamedTuple

import numpy as np

from . import emu
from .attn_params import AttnParams
from .layouts import Layout, contiguous_last

# |fused - float64 reference| <= ATOL + RTOL * |reference|: the kernel works in
# fp32, so what remains is the rounding of the output to its dtype (half an
# ulp: 2^-11 for float16, 2^-8 for bfloat16) plus fp32 accumulation.
TOL = {"float16": (5e-4, 2e-3), "bfloat16": (4e-3, 1.6e-2), "float32": (2e-5, 1e-4)}

# Each input its own order of [B, H, L] (outermost first; D innermost) and
# its own spare batch entries, heads and rows, so that no two inputs share a
# batch or head stride: an offset taken with another input's stride, or
# another axis's, reads poison or the wrong element.
INDEPENDENT = {
    "q": contiguous_last((0, 1, 2), (1, 2, 1), 4),
    "k": contiguous_last((1, 0, 2), (2, 1, 3), 4),
    "v": contiguous_last((2, 0, 1), (1, 3, 0), 4),
    "out": contiguous_last((1, 2, 0), (3, 1, 2), 4),
    "mask": Layout((3, 1, 0, 2), (1, 2, 3, 1)),
}


# ---------------------------------------------------------------------------
# Inputs in the kernel's dtype: (device array, float64 values it holds).


def to_device(x, dtype):
    x = np.asarray(x, dtype=np.float32)
    if dtype == "bfloat16":
        bits = emu.float_to_bfloat16_bits(x)
        return bits, emu.bfloat16_bits_to_float(bits).astype(np.float64)
    dev = x.astype(dtype)
    return dev, dev.astype(np.float64)


def from_device(x, dtype):
    if dtype == "bfloat16":
        return emu.bfloat16_bits_to_float(x).astype(np.float64)
    return x.astype(np.float64)


def finfo_min(dtype):
    if dtype == "bfloat16":
        return float(emu.bfloat16_bits_to_float(np.array([0xFF7F], np.uint16))[0])
    return float(np.finfo(dtype).min)


def named_layouts(layout):
    """The Layouts of q, k, v and the output for `layout`: "bhld" (rows
    padded inside each head: 1, 3 and 2 spare rows) or "blhd" (the
    [B, L, H, D] transpose); the output is bhld with 2 spare rows."""
    rows = {"q": 1, "k": 3, "v": 2}
    if layout == "bhld":
        out = {name: Layout((0, 1, 2, 3), (0, 0, pad, 0)) for name, pad in rows.items()}
    else:
        out = {name: Layout((0, 2, 1, 3), (0, 0, 0, 0)) for name in rows}
    out["out"] = Layout((0, 1, 2, 3), (0, 0, 2, 0))
    return out


def poison(dtype):
    """NaN in the kernel's dtype (bfloat16: its bits)."""
    return to_device(np.full(1, np.nan, np.float32), dtype)[0][0]


# ---------------------------------------------------------------------------
# Reference


def reference(q, k, v, scale, dtype, causal=False, bool_mask=None, add_mask=None, sinks=None):
    """float64 attention with MLX's semantics; inputs are float64 arrays."""
    H_q, H_kv = q.shape[1], k.shape[1]
    k = np.repeat(k, H_q // H_kv, axis=1)
    v = np.repeat(v, H_q // H_kv, axis=1)
    s = scale * (q @ k.transpose(0, 1, 3, 2))
    L_q, L_k = s.shape[-2:]
    masked = finfo_min(dtype)
    if causal:
        i = np.arange(L_q)[:, None]
        j = np.arange(L_k)[None, :]
        s = np.where(j <= i + (L_k - L_q), s, masked)
    if bool_mask is not None:
        s = np.where(bool_mask, s, masked)
    if add_mask is not None:
        s = s + add_mask
    if sinks is not None:
        sink_col = np.broadcast_to(sinks[None, :, None, None], s.shape[:-1] + (1,))
        s = np.concatenate([sink_col, s], axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        m = s.max(axis=-1, keepdims=True)
        p = np.exp(s - m)
        p = p / p.sum(axis=-1, keepdims=True)
    if sinks is not None:
        p = p[..., 1:]
    return p @ v


# ---------------------------------------------------------------------------
# An array mask's classes by block (mlx_fused_attn/kernels/mask_visits.h)

SHOWN, TWO_VALUED, VALUES, TWO_VALUED_SCALED = range(4)


def visit_rows(L_k, bk):
    """(visit row, shown-bits words a row) as mlx_fused_attn/mask_visits.cpp."""
    unit = max(bk, 32)
    return -(-L_k // bk) + 3, -(-L_k // unit) * (unit // 32)


def score_classes(mask, kind, L_q, L_k):
    """(the mask broadcast to [B_m, H_m, L_q, L_k], where each score is
    hidden, where shown, the float32 values of an additive mask or None)."""
    m = np.asarray(mask)
    m = m.reshape((1,) * (4 - m.ndim) + m.shape)
    m = np.broadcast_to(m, m.shape[:2] + (L_q, L_k))
    if kind == "bool":
        return m, ~m, m, None
    values = m.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        m2 = values * np.float32(np.log2(np.e))
    return m, m2 < -0.5 * np.finfo(np.float32).max, m2 == 0, values


def backward_list_rows(kind, L_q, L_k, dkdv_keys, dkdv_queries, dq_queries, dq_keys):
    """(dK/dV row length, dK/dV bit words a key, where the dQ rows start, dQ
    row length, dQ bit words a query, total) of a slice, as
    mlx_fused_attn/plan/mask_list_layout.h's backward_list_rows."""
    bits = kind == "bool"
    dkdv_rows, dq_rows = -(-L_k // dkdv_keys), -(-L_q // dq_queries)
    dkdv_row = 1 + -(-L_q // dkdv_queries)
    dkdv_words = visit_rows(L_q, dkdv_queries)[1] if bits else 0
    dq_start = dkdv_rows * dkdv_row + dkdv_rows * dkdv_keys * dkdv_words
    dq_row = 1 + -(-L_k // dq_keys)
    dq_words = visit_rows(L_k, dq_keys)[1] if bits else 0
    total = dq_start + dq_rows * dq_row + dq_rows * dq_queries * dq_words
    return dkdv_row, dkdv_words, dq_start, dq_row, dq_words, total


def shown_bits(shown, rows, words):
    """shown [n, m] as `rows` rows of `words` uint32 words, bit c of a row set
    where column c is shown (rows and columns past n and m clear)."""
    bits = np.zeros((rows, words * 32), bool)
    bits[: shown.shape[0], : shown.shape[1]] = shown
    packed = (bits.reshape(rows, words, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(-1)
    return packed.astype(np.uint32).reshape(-1)


def backward_mask_lists(mask, kind, L_q, L_k, dkdv_keys, dkdv_queries, dq_queries, dq_keys):
    """uint32 [B_m, H_m, total] as mlx_fused_attn/op/mask_block_lists.cpp's
    backward_mask_lists builds it: a row per key block of dkdv_keys keys
    (the count of listed blocks of dkdv_queries queries, then qb * 4 + class
    of each, qb ascending); for a bool mask the dK/dV kernel's shown bits,
    a row per key over the queries; a row per query block of dq_queries
    queries (the count, then kb * 4 + class over blocks of dq_keys keys);
    for a bool mask the dQ kernel's shown bits, a row per query over the
    keys. A block is listed unless its every score is hidden and no row of
    it sees no key; its class is SHOWN where every score is shown, else
    TWO_VALUED (bool: its bits are read) or VALUES (additive)."""
    m, hidden, shown, _ = score_classes(mask, kind, L_q, L_k)
    dead = hidden.all(axis=-1)
    read = TWO_VALUED if kind == "bool" else VALUES
    _, dkdv_words, _, _, dq_words, _ = backward_list_rows(
        kind, L_q, L_k, dkdv_keys, dkdv_queries, dq_queries, dq_keys)

    def rows(idx, bq, bk, by_keys):
        n_qb, n_kb = -(-L_q // bq), -(-L_k // bk)
        listed = {}
        for qb in range(n_qb):
            r = slice(qb * bq, (qb + 1) * bq)
            for kb in range(n_kb):
                c = slice(kb * bk, (kb + 1) * bk)
                if hidden[idx][r, c].all() and not dead[idx][r].any():
                    continue
                listed[(qb, kb)] = SHOWN if shown[idx][r, c].all() else read
        out = []
        for row in range(n_kb if by_keys else n_qb):
            cols = n_qb if by_keys else n_kb
            entries = [
                col * 4 + listed[key]
                for col in range(cols)
                for key in [(col, row) if by_keys else (row, col)]
                if key in listed
            ]
            out += [len(entries)] + entries + [0] * (cols - len(entries))
        return out

    slices = []
    for idx in np.ndindex(*m.shape[:2]):
        dkdv_bits = dq_bits = []
        if kind == "bool":
            dkdv_bits = shown_bits(shown[idx].T, -(-L_k // dkdv_keys) * dkdv_keys, dkdv_words)
            dq_bits = shown_bits(shown[idx], -(-L_q // dq_queries) * dq_queries, dq_words)
        slices.append(
            rows(idx, dkdv_queries, dkdv_keys, True) + list(dkdv_bits)
            + rows(idx, dq_queries, dq_keys, False) + list(dq_bits)
        )
    return np.array(slices, np.uint32).reshape(m.shape[:2] + (-1,))


def mask_visits(mask, kind, L_q, L_k, bq, bk):
    """uint32 [B_m, H_m, n_qb * visit + n_qb * bq * words] as
    mlx_fused_attn/op/mask_block_lists.cpp builds it: per query block the count of
    visited key blocks, the off value's row and column, then kb * 4 + class
    for each, kb ascending; then the shown bits of every row. mask: bool, or
    the float64 values the kernel reads (additive), of rank <= 4."""
    m, hidden, shown, values = score_classes(mask, kind, L_q, L_k)
    n_qb, n_kb = -(-L_q // bq), -(-L_k // bk)
    visit, words = visit_rows(L_k, bk)
    dead = hidden.all(axis=-1)
    out = np.zeros(m.shape[:2] + (n_qb * visit + n_qb * bq * words,), np.uint32)
    for idx in np.ndindex(*m.shape[:2]):
        for qb in range(n_qb):
            rows = slice(qb * bq, (qb + 1) * bq)
            blocks = [slice(kb * bk, (kb + 1) * bk) for kb in range(n_kb)]
            all_hidden = [hidden[idx][rows, c].all() for c in blocks]
            off_row = off_col = 0
            off = None
            if kind != "bool":
                # The least value outside shown scores, NaN and hidden blocks.
                cand = np.where(shown[idx][rows] | np.isnan(values[idx][rows]), np.inf, values[idx][rows])
                for kb, c in enumerate(blocks):
                    if all_hidden[kb]:
                        cand[:, c] = np.inf
                padded = np.full((bq, n_kb * bk), np.inf, np.float32)
                padded[: cand.shape[0], :L_k] = cand
                at = int(np.argmin(padded))
                off_row, off_col = qb * bq + at // (n_kb * bk), at % (n_kb * bk)
                off = values[idx][off_row, off_col] if off_row < L_q and off_col < L_k else 0.0
            keep_all = dead[idx][rows].any()
            listed = []
            for kb, c in enumerate(blocks):
                if all_hidden[kb] and not keep_all:
                    continue
                if keep_all:
                    cls = TWO_VALUED_SCALED if kind == "bool" else VALUES
                elif shown[idx][rows, c].all():
                    cls = SHOWN
                elif kind == "bool" or (shown[idx][rows, c] | (values[idx][rows, c] == off)).all():
                    cls = TWO_VALUED
                else:
                    cls = VALUES
                listed.append(kb * 4 + cls)
            row = [len(listed), off_row, off_col] + listed
            out[idx + (slice(qb * visit, qb * visit + len(row)),)] = row
        out[idx + (slice(n_qb * visit, None),)] = shown_bits(shown[idx], n_qb * bq, words)
    return out


# ---------------------------------------------------------------------------
# One launch


class Launch(NamedTuple):
    """A family's kernel for one case: its host name, grid, warps a
    threadgroup, and its function constants other than the features."""

    name: str
    grid: tuple
    warps: int
    constants: dict
    visit_tiles: tuple = None  # (bq, bk): binds a mask's classes by block (buffer 11)
    visit_rows: int = None  # the query rows the classes cover (packed GQA: a query's heads); L_q if None


def run_case(
    prog,
    launch,
    features,
    *,
    dtype,
    D,
    D_v,
    B,
    H_q,
    L_q,
    L_k,
    H_kv=None,
    causal=False,
    mask=None,
    mask_shape=None,
    sinks=False,
    layout="bhld",
    layouts=None,
    seed=0,
    schedule="fair",
    race_check=False,
    edit=None,
    device_mask_edit=None,
    device_kv_edit=None,
    scale=None,
    dispatch=None,
):
    """Runs `launch` on one case and checks it. D is the head dim of q and
    k, D_v that of v and the output. features: the family's function
    constants by name ("has_mask", "bool_mask", "causal", "has_sinks").
    mask: None, "bool" or "additive", of mask_shape (broadcast to [B, H_q,
    L_q, L_k] through zero strides). layouts: {"q" | "k" | "v" | "out" |
    "mask": Layout} in place of named_layouts(layout) (a mask given one is
    stored whole, its padding poisoned). edit(inputs) may change the float32
    inputs (a dict) before the launch; device_mask_edit(mask) the mask the
    kernel reads alone (in its dtype), after the reference and the classes
    by block took theirs; device_kv_edit("k" | "v", array) returns the
    buffer the kernel gets in place of that one. dispatch(buffers, constants, schedule,
    race_check), in place of one launch of `launch`, runs the kernels and
    returns the buffers (the output at 3). Returns the fused output, the
    reference and v, as float64."""
    H_kv = H_kv or H_q
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(D) if scale is None else scale
    inputs = {
        "q": rng.standard_normal((B, H_q, L_q, D)).astype(np.float32),
        "k": rng.standard_normal((B, H_kv, L_k, D)).astype(np.float32),
        "v": rng.standard_normal((B, H_kv, L_k, D_v)).astype(np.float32),
        "sinks": rng.standard_normal(H_q).astype(np.float32) if sinks else None,
    }
    mask_shape = tuple(mask_shape or (B, H_q, L_q, L_k))
    if mask == "bool":
        inputs["mask"] = rng.random(mask_shape) < 0.7
    elif mask == "additive":
        inputs["mask"] = rng.standard_normal(mask_shape).astype(np.float32)
    if edit is not None:
        edit(inputs)

    buffers, strides, ref_kwargs, places, (q64, k64, v64) = place_inputs(
        inputs, dtype, layout, layouts, mask, device_mask_edit, device_kv_edit
    )
    block_strides = (0, 0, 0, 0)
    with_blocks = mask is not None and launch.visit_tiles is not None
    if with_blocks:
        ref_mask = ref_kwargs.get("bool_mask", ref_kwargs.get("add_mask"))
        blocks = mask_visits(ref_mask, mask, launch.visit_rows or L_q, L_k, *launch.visit_tiles)
        buffers[11] = blocks
        block_strides = tuple(
            st // 4 if n > 1 else 0 for st, n in zip(blocks.strides[:2], blocks.shape[:2])
        ) + visit_rows(L_k, launch.visit_tiles[1])
    buffers[4] = AttnParams(
        B=B,
        H_q=H_q,
        H_kv=H_kv,
        gqa_factor=H_q // H_kv,
        L_q=L_q,
        L_k=L_k,
        D=D,
        D_v=D_v,
        causal_offset=L_k - L_q,
        scale_log2=scale * np.log2(np.e),
        q_strides=strides["q"][:3],
        k_strides=strides["k"][:3],
        v_strides=strides["v"][:3],
        o_strides=strides["out"][:3],
        mask_strides=strides["mask"],
        mask_block_strides=block_strides,
        mask_pairs=mask_pairs(mask, L_k, strides["mask"]),
    )
    constants = {
        features["has_mask"]: mask is not None,
        features["bool_mask"]: mask == "bool",
        features["causal"]: causal,
        features["has_sinks"]: sinks,
        **({features["mask_blocks"]: with_blocks} if "mask_blocks" in features else {}),
        **launch.constants,
    }
    # A library that holds several families declares their constants too;
    # the emulator wants a value for each, though only this family's are read.
    for index in prog.constants:
        constants.setdefault(index, False)
    if dispatch is None:
        res = prog.launch(
            launch.name,
            buffers=buffers,
            constants=constants,
            grid=launch.grid,
            threadgroup=(32, launch.warps, 1),
            schedule=schedule,
            race_check=race_check,
        )
    else:
        res = dispatch(buffers, constants, schedule, race_check)
    fused = output(res[3], places["out"], dtype)
    ref = reference(q64, k64, v64, scale, dtype, causal=causal, **ref_kwargs)
    check(
        fused,
        ref,
        dtype,
        f"{launch.name} D={D} D_v={D_v} L_q={L_q} L_k={L_k} B={B} H_q={H_q} H_kv={H_kv} "
        f"causal={causal} mask={mask} sinks={sinks} layout={layouts or layout} seed={seed}",
    )
    return fused, ref, v64


def check(fused, ref, dtype, what):
    """Every output element against the float64 reference, within TOL;
    `what` names the case in a failure."""
    atol, rtol = TOL[dtype]
    np.testing.assert_allclose(fused, ref, atol=atol, rtol=rtol, err_msg=what)


def mask_pairs(mask, L_k, strides):
    """params.h's mask_pairs as launch_params sets it (launch_params.cpp);
    the placed masks start their storage, so their offset is 0."""
    return int(mask == "additive" and L_k % 2 == 0 and strides[3] == 1
               and all(st % 2 == 0 for st in strides[:3]))


def place_inputs(inputs, dtype, layout, layouts, mask, device_mask_edit=None, device_kv_edit=None):
    """The buffers of q, k, v, the NaN-poisoned output (0-3), the mask (5)
    and sinks (6) as the host binds them, each stored in its own Layout with
    its padding poisoned. Returns (buffers, {"q" | "k" | "v" | "out" |
    "mask": element strides}, the reference's mask and sinks arguments, the
    Layouts, the float64 values of q, k and v)."""
    places = {**named_layouts(layout), **(layouts or {})}
    buffers, strides, ref_kwargs, values = {}, {}, {}, []
    B, H_q, L_q, _ = inputs["q"].shape
    D_v = inputs["v"].shape[-1]
    for index, x in enumerate("qkv"):
        dev, x64 = to_device(inputs[x], dtype)
        values.append(x64)
        if device_kv_edit is not None and x != "q":
            dev = device_kv_edit(x, dev)
        buffers[index], strides[x] = places[x].place(dev, poison(dtype))
    out_nan = np.full((B, H_q, L_q, D_v), poison(dtype))
    buffers[3], strides["out"] = places["out"].place(out_nan, poison(dtype))
    strides["mask"] = (0, 0, 0, 0)
    if mask is not None:
        m = inputs["mask"]
        if mask == "bool":
            dev, ref_kwargs["bool_mask"] = m, m
        else:
            dev, ref_kwargs["add_mask"] = to_device(m, dtype)
        if device_mask_edit is not None:
            dev = dev.copy()
            device_mask_edit(dev)
        if "mask" in places:
            # Bool padding is False: read in place of a True, it masks a key.
            fill = False if mask == "bool" else poison(dtype)
            buffers[5], strides["mask"] = places["mask"].place(dev, fill)
        else:
            dev = np.ascontiguousarray(dev)
            full = (B, H_q, L_q, inputs["k"].shape[2])
            view = np.broadcast_to(dev.reshape((1,) * (4 - dev.ndim) + dev.shape), full)
            strides["mask"] = tuple(s // dev.itemsize for s in view.strides)
            buffers[5] = dev
    if inputs["sinks"] is not None:
        buffers[6], ref_kwargs["sinks"] = to_device(inputs["sinks"], dtype)
    return buffers, strides, ref_kwargs, places, values


def output(result, layout, dtype):
    """The output in float64, after checking that the kernel wrote nothing
    outside it (its padding still NaN)."""
    o_all = from_device(result, dtype)
    assert np.isnan(layout.padding(o_all)).all(), "the kernel wrote outside its output"
    return layout.view(o_all)
