"""patch_mx_fast: the patched function has mx.fast's signature and results,
routes as route() says, nests, restores mx.fast, and is safe across threads."""

import inspect
import re
import threading

import mlx.core as mx
import numpy as np
import pytest
from conftest import rand

import mlx_fused_attn as fa
from mlx_fused_attn import patching, routing

ORIGINAL = mx.fast.scaled_dot_product_attention


@pytest.fixture(autouse=True)
def unpatched():
    yield
    fa.unpatch_mx_fast()
    mx.fast.scaled_dot_product_attention = ORIGINAL


def inputs(dtype=mx.float32, L=16, D=32, seed=0):
    return (
        rand((2, 4, L, D), dtype, seed),
        rand((2, 2, L, D), dtype, seed + 1),
        rand((2, 2, L, D), dtype, seed + 2),
    )


def run(q, k, v, **kw):
    kw.setdefault("scale", q.shape[-1] ** -0.5)
    out = mx.fast.scaled_dot_product_attention(q, k, v, **kw)
    mx.eval(out)
    return out


def test_signature_is_mx_fasts():
    """Same parameter names, order, keyword-only marker and defaults as the
    installed MLX's binding (read from its nanobind signature)."""
    text = ORIGINAL.__nb_signature__[0][0]
    params = text[text.index("(") + 1 : text.rindex(")")]
    theirs = []
    for part in (p.strip() for p in params.split(",")):
        if part == "*":
            theirs.append("*")
            continue
        m = re.match(r"(\w+)\s*:[^=]*(?:=\s*(.+))?$", part)
        theirs.append((m.group(1), m.group(2)))
    ours = []
    for p in inspect.signature(patching.scaled_dot_product_attention).parameters.values():
        if p.kind is p.KEYWORD_ONLY and "*" not in ours:
            ours.append("*")
        default = None if p.default is p.empty else repr(p.default)
        ours.append((p.name, default))
    assert ours == theirs


def test_context_patches_and_restores():
    q, k, v = inputs()
    expected = run(q, k, v, mask="causal")
    with fa.patch_mx_fast() as patch:
        assert mx.fast.scaled_dot_product_attention is patching.scaled_dot_product_attention
        got = run(q, k, v, mask="causal")
        assert patch.active
    assert mx.fast.scaled_dot_product_attention is ORIGINAL
    assert not patch.active
    np.testing.assert_allclose(np.array(got), np.array(expected), atol=2e-6)
    assert patch.stats == fa.PatchStats(fused=1, fallback=0, passed_through=0)


def test_plain_call_and_unpatch():
    fa.patch_mx_fast()
    assert mx.fast.scaled_dot_product_attention is patching.scaled_dot_product_attention
    assert fa.unpatch_mx_fast() is True
    assert mx.fast.scaled_dot_product_attention is ORIGINAL
    assert fa.unpatch_mx_fast() is False  # nothing to undo: a no-op


def test_nesting():
    with fa.patch_mx_fast() as outer:
        with fa.patch_mx_fast(policy="fused") as inner:
            assert patching._policy == "fused"
        assert not inner.active and outer.active
        assert patching._policy == "auto"
        assert mx.fast.scaled_dot_product_attention is patching.scaled_dot_product_attention
        # A plain call inside a context outlives it.
        fa.patch_mx_fast()
    assert mx.fast.scaled_dot_product_attention is patching.scaled_dot_product_attention
    fa.unpatch_mx_fast()
    assert mx.fast.scaled_dot_product_attention is ORIGINAL


def test_out_of_order_removal_and_unpatch_inside_a_context():
    a, b = fa.patch_mx_fast(), fa.patch_mx_fast(policy="fused")
    assert a.remove() and not a.remove()
    assert patching._policy == "fused"
    assert b.remove()
    assert mx.fast.scaled_dot_product_attention is ORIGINAL
    with fa.patch_mx_fast() as patch:
        fa.unpatch_mx_fast()
        assert mx.fast.scaled_dot_product_attention is ORIGINAL
    assert not patch.active and mx.fast.scaled_dot_product_attention is ORIGINAL


def test_bad_policy():
    with pytest.raises(ValueError, match="policy must be one of 'auto', 'fused'"):
        fa.patch_mx_fast(policy="fast")
    with pytest.raises(ValueError, match="policy must be one of"):
        fa.route(*inputs(), scale=1.0, policy="always")
    assert mx.fast.scaled_dot_product_attention is ORIGINAL


def test_counts_by_route():
    q, k, v = inputs()
    with fa.patch_mx_fast() as patch:
        run(q, k, v)  # CPU: fused
        with mx.stream(mx.cpu):  # no fused kernel for float64, no GPU float64
            run(q.astype(mx.float64), k, v)
        with pytest.raises(ValueError, match="n_heads must be a multiple"):
            run(q, mx.zeros((2, 3, 16, 32)), mx.zeros((2, 3, 16, 32)))
    assert patch.stats.fused == 1 and patch.stats.fallback == 2
    assert fa.patch_stats().fused >= 1


def test_rejected_arguments_raise_mx_fasts_error():
    """A call the package does not accept goes to mx.fast, which raises its
    own error (or computes, for what only the package rejects)."""
    q, k, v = inputs()
    with fa.patch_mx_fast():
        with pytest.raises(ValueError, match="invalid mask option"):
            run(q, k, v, mask="upper")
        out = run(q, k, v, scale=float("nan"))  # mx.fast computes it
    assert np.isnan(np.array(out)).all()


def test_force_fused_takes_our_kernel():
    q, k, v = inputs()
    with pytest.raises(ValueError):
        run(q, k, v, force_fused=True, stream=mx.cpu)  # mx.fast has none on the CPU
    with fa.patch_mx_fast() as patch:
        run(q, k, v, force_fused=True, stream=mx.cpu)
    assert patch.stats.fused == 1


def test_replaced_after_patching_is_left_in_place():
    patch = fa.patch_mx_fast()

    def theirs(*args, **kw):
        return patching.scaled_dot_product_attention(*args, **kw)

    mx.fast.scaled_dot_product_attention = theirs
    with pytest.warns(RuntimeWarning, match="replaced after patch_mx_fast"):
        patch.remove()
    assert mx.fast.scaled_dot_product_attention is theirs
    run(*inputs())  # ours still works under theirs, with the original behind it


def test_compiled_before_patching_keeps_mx_fast():
    """mx.compile keeps a trace per Python function and input shapes while a
    compiled version of the function lives: one traced before patching
    replays mx.fast for those shapes (so does a new mx.compile of the same
    function); new shapes trace again and are routed."""

    def attend(q, k, v):
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=0.2, mask="causal")

    q, k, v = inputs(L=16)
    step = mx.compile(attend)
    mx.eval(step(q, k, v))
    with fa.patch_mx_fast() as patch:
        mx.eval(step(q, k, v))
        mx.eval(mx.compile(attend)(q, k, v))
        assert patch.stats.fused == 0
        q2, k2, v2 = inputs(L=17)
        mx.eval(step(q2, k2, v2))
        assert patch.stats.fused == 1


def test_compiled_after_patching_is_routed():
    def attend(q, k, v):
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=0.2)

    q, k, v = inputs(L=19)
    expected = run(q, k, v, scale=0.2)
    with fa.patch_mx_fast() as patch:
        step = mx.compile(attend)
        got = step(q, k, v)
        got2 = step(q, k, v)
    np.testing.assert_allclose(np.array(got), np.array(expected), atol=2e-6)
    np.testing.assert_array_equal(np.array(got), np.array(got2))
    assert patch.stats.fused == 1  # traced once, replayed once


def test_threads():
    """Threads patching, unpatching and calling at once: every call gives
    the right answer, and mx.fast ends as it began."""
    q, k, v = inputs(L=33)
    expected = np.array(run(q, k, v, mask="causal"))
    errors = []

    def worker(i):
        try:
            for j in range(15):
                if (i + j) % 3 == 0:
                    with fa.patch_mx_fast(policy=("auto", "fused")[j % 2]):
                        got = run(q, k, v, mask="causal", stream=mx.cpu)
                else:
                    got = run(q, k, v, mask="causal", stream=mx.cpu)
                np.testing.assert_allclose(np.array(got), expected, atol=2e-6)
        except Exception as e:  # reported below, with the thread
            errors.append((i, e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert mx.fast.scaled_dot_product_attention is ORIGINAL


def test_route_on_the_cpu():
    q, k, v = inputs()
    assert fa.route(q, k, v, scale=1.0, stream=mx.cpu)[0] == routing.FUSED
    choice, reason = fa.route(q.astype(mx.float64, stream=mx.cpu), k, v, scale=1.0, stream=mx.cpu)
    assert choice == routing.FALLBACK and "float64" in reason
    choice, reason = fa.route(q, k, v, scale=1.0, mask="upper")
    assert choice == routing.FALLBACK and "does not accept" in reason


@pytest.mark.parametrize(
    "stream",
    [mx.cpu, mx.Device(mx.cpu), mx.default_stream(mx.cpu), mx.new_stream(mx.cpu)],
    ids=["DeviceType", "Device", "default Stream", "new Stream"],
)
def test_route_reads_the_device_of_every_stream_kind(stream):
    assert routing._device(stream) == mx.Device(mx.cpu)
    assert fa.route(*inputs(), scale=1.0, stream=stream)[0] == routing.FUSED


@pytest.mark.parametrize(
    "backend, shape_q, shape_kv, dtype",
    [
        ("cuda", (1, 32, 1, 128), (1, 8, 4096, 128), mx.float32),  # float32 decoding
        ("cuda", (1, 8, 1, 256), (1, 8, 4096, 256), mx.float16),  # decoding past cuDNN
        ("cuda", (1, 32, 1024, 128), (1, 32, 1024, 128), mx.bfloat16),  # cuDNN
        ("cuda", (1, 32, 1024, 64), (1, 32, 1024, 64), mx.float32),  # unfused TF32
        ("metal", (1, 32, 1, 128), (1, 8, 4096, 128), mx.float16),  # vector kernel
        ("metal", (4, 32, 31, 64), (4, 32, 31, 64), mx.float16),
    ],
)
def test_gpu_rules_decided_by_shape(monkeypatch, backend, shape_q, shape_kv, dtype):
    """The GPU rules that the shapes alone decide, checked without a GPU:
    mx.fast, with the reason naming the device, and no argument checks
    (inputs the package would reject go through too)."""
    monkeypatch.setattr(routing, "_gpu_backend", lambda: backend)
    monkeypatch.setattr(routing, "_device", lambda stream: mx.Device(mx.gpu))
    # The rules alone: no shipped or tuned measurement of the machine's own GPU.
    monkeypatch.setattr(routing, "_measured", lambda *args: None)
    q, kv = mx.zeros(shape_q, dtype), mx.zeros(shape_kv, dtype)
    choice, reason = fa.route(q, kv, kv, scale=float("nan"))
    assert choice == routing.PASSTHROUGH
    assert reason.startswith("CUDA" if backend == "cuda" else "Metal")


@pytest.mark.parametrize(
    "head_dim, mask_dtype, expected",
    [
        (128, mx.bool_, routing.FUSED),  # mx.fast's bool masks time as plain ops
        (64, mx.bool_, routing.FUSED),
        (64, mx.float16, routing.FUSED),  # additive: measured faster at D = 64
        (128, mx.float16, routing.PASSTHROUGH),  # additive past D = 64: cuDNN
    ],
)
def test_cuda_array_mask_rule(monkeypatch, head_dim, mask_dtype, expected):
    """Array masks on CUDA, checked without a GPU: fp16 prefill past the
    short kernel's lengths goes to mx.fast unless the mask is one that ours
    was measured faster with; the reason names the device."""
    monkeypatch.setattr(routing, "_gpu_backend", lambda: "cuda")
    monkeypatch.setattr(routing, "_device", lambda stream: mx.Device(mx.gpu))
    q = mx.zeros((1, 4, 256, head_dim), mx.float16)
    mask = mx.zeros((1, 1, 256, 256), mask_dtype)
    choice, reason = fa.route(q, q, q, scale=1.0, mask=mask)
    assert (choice, reason[:5]) == (expected, "CUDA:"), reason
    # Without the mask the same call keeps cuDNN.
    assert fa.route(q, q, q, scale=1.0)[0] == routing.PASSTHROUGH


@pytest.mark.parametrize(
    "note, expected",
    [
        ("keys split 4 ways", routing.FUSED),  # a grid under one wave
        ("", routing.PASSTHROUGH),  # a GPU whose wave the grid fills
    ],
)
def test_cuda_long_cache_rule(monkeypatch, note, expected):
    """Few queries against a long cache on CUDA, checked without a GPU: ours
    where the plan splits the keys (its code, KEYS_SPLIT), cuDNN otherwise;
    with fewer keys a query the shapes alone send the call to cuDNN."""
    monkeypatch.setattr(routing, "_gpu_backend", lambda: "cuda")
    monkeypatch.setattr(routing, "_device", lambda stream: mx.Device(mx.gpu))
    code = fa.plans.KEYS_SPLIT if note else fa.plans.GENERAL_KERNEL
    plan = fa.PlanSummary(code, note, "attention", 4 if note else 1, False, {})
    monkeypatch.setattr(fa, "plan_summary", lambda *a, **kw: plan)
    q = mx.zeros((1, 32, 16, 128), mx.bfloat16)
    kv = mx.zeros((1, 8, 16 * routing.CUDA_SPLIT_KEYS_PER_QUERY, 128), mx.bfloat16)
    choice, reason = fa.route(q, kv, kv, scale=1.0, mask="causal")
    assert (choice, reason[:5]) == (expected, "CUDA:"), reason
    assert note in reason

    def no_check(*a, **kw):
        raise AssertionError("the shapes decide: no coverage check")

    monkeypatch.setattr(fa, "plan_summary", no_check)
    short = kv[:, :, : 16 * routing.CUDA_SPLIT_KEYS_PER_QUERY - 1]
    assert fa.route(q, short, short, scale=1.0, mask="causal")[0] == routing.PASSTHROUGH


@pytest.mark.parametrize(
    "architecture, expected",
    [
        ("applegpu_g16s", False),  # M4 Pro: no neural accelerators
        ("applegpu_g13g", False),  # M1
        ("applegpu_g17s", True),  # M5 class
        ("applegpu_g17g", True),
        ("applegpu_g17p", False),  # phone class: from generation 18
        ("applegpu_g18p", True),
        ("x86_64", False),  # not an Apple GPU's string
        ("", False),
    ],
)
def test_neural_accelerators_as_mlx_reads_them(architecture, expected):
    """MLX 0.32.4's is_nax_available on the architecture string: generation
    17 or later (18 for 'p' GPUs)."""
    assert routing.has_neural_accelerators(architecture) is expected


@pytest.mark.parametrize(
    "architecture, head_dim, head_dim_v, expected",
    [
        ("applegpu_g16s", 128, 128, None),
        ("applegpu_g15g", 64, 64, None),
        ("applegpu_g16s", 192, 128, "head dims past 128"),
        ("applegpu_g16s", 128, 256, "head dims past 128"),
        ("applegpu_g17s", 64, 64, "neural accelerators"),
        ("applegpu_g17s", 256, 256, "neural accelerators"),
    ],
)
def test_metal_verdict(architecture, head_dim, head_dim_v, expected):
    """Apple GPUs: mx.fast past head dim 128 and on GPUs whose neural
    accelerators MLX runs mx.fast on, each with a reason saying it is
    unmeasured on Apple hardware; otherwise the other rules decide."""
    verdict = routing.metal_verdict(architecture, head_dim, head_dim_v)
    if expected is None:
        assert verdict is None
        return
    choice, reason = verdict
    assert choice == routing.PASSTHROUGH and reason.startswith("Metal:")
    assert expected in reason and "measured" in reason and "Apple hardware" in reason, reason


@pytest.mark.parametrize(
    "gpu, head_dim, expected",
    [
        ("applegpu_g16s", 128, routing.FUSED),
        ("applegpu_g16s", 256, routing.PASSTHROUGH),
        ("applegpu_g17s", 64, routing.PASSTHROUGH),
    ],
)
def test_metal_route_by_gpu_and_head_dim(monkeypatch, gpu, head_dim, expected):
    """route on an Apple GPU, checked without one: the GPU and the head dims
    send the call to mx.fast before any coverage check; policy="fused" (and
    force_fused) still runs ours wherever a kernel covers the call."""
    monkeypatch.setattr(routing, "_gpu_backend", lambda: "metal")
    monkeypatch.setattr(routing, "_device", lambda stream: mx.Device(mx.gpu))
    monkeypatch.setattr(routing, "_gpu_architecture", lambda: gpu)
    checked = []

    def covered(*a, **kw):
        checked.append(True)
        return fa.PlanSummary(fa.plans.GENERAL_KERNEL, "", "attention", 1, False, {})

    monkeypatch.setattr(fa, "plan_summary", covered)
    q = mx.zeros((1, 8, 256, head_dim), mx.float16)
    choice, reason = fa.route(q, q, q, scale=1.0)
    assert (choice, reason[:6]) == (expected, "Metal:"), reason
    assert bool(checked) == (expected == routing.FUSED)
    assert fa.route(q, q, q, scale=1.0, policy="fused")[0] == routing.FUSED


CUDA = mx.is_available(mx.gpu) and fa.build_info()["gpu_backend"] == "cuda"


@pytest.mark.skipif(not CUDA, reason="needs MLX's CUDA backend and this package's CUDA kernels")
@pytest.mark.parametrize(
    "shape_q, shape_kv, dtype, auto, fused",
    [
        (
            (64, 8, 32, 64),
            (64, 8, 32, 64),
            mx.float16,
            routing.FUSED,
            routing.FUSED,
        ),  # short kernel
        (
            (64, 8, 32, 80),
            (64, 8, 32, 80),
            mx.float16,
            routing.PASSTHROUGH,
            routing.FUSED,
        ),  # general
        (
            (1, 32, 1, 128),
            (1, 8, 4096, 128),
            mx.float16,
            routing.FUSED,
            routing.FUSED,
        ),  # decoding: split keys
        ((1, 32, 1024, 128), (1, 32, 1024, 128), mx.bfloat16, routing.PASSTHROUGH, routing.FUSED),
        # Few queries against a long cache: ours splits the keys, cuDNN not.
        ((1, 32, 16, 128), (1, 8, 4096, 128), mx.bfloat16, routing.FUSED, routing.FUSED),
        ((1, 32, 1024, 64), (1, 32, 1024, 64), mx.float32, routing.PASSTHROUGH, routing.FUSED),
        # Past cuDNN's head dims mx.fast runs plain ops.
        ((1, 8, 256, 256), (1, 8, 256, 256), mx.float16, routing.FUSED, routing.FUSED),
        ((1, 8, 32, 256), (1, 8, 32, 256), mx.float16, routing.FUSED, routing.FUSED),
        ((1, 8, 1, 256), (1, 8, 4096, 256), mx.float16, routing.PASSTHROUGH, routing.FUSED),
    ],
)
def test_route_on_cuda(shape_q, shape_kv, dtype, auto, fused):
    q = mx.zeros(shape_q, dtype)
    kv = mx.zeros(shape_kv, dtype)
    got, reason = fa.route(q, kv, kv, scale=1.0, stream=mx.gpu)
    assert got == auto, reason
    got, reason = fa.route(q, kv, kv, scale=1.0, stream=mx.gpu, policy="fused")
    assert got == fused, reason


@pytest.mark.skipif(not CUDA, reason="needs MLX's CUDA backend and this package's CUDA kernels")
@pytest.mark.parametrize(
    "head_dim, mask_dtype, expected",
    [
        (128, mx.bool_, routing.FUSED),
        (64, mx.bfloat16, routing.FUSED),
        (128, mx.bfloat16, routing.PASSTHROUGH),
    ],
)
def test_route_array_masks_on_cuda(head_dim, mask_dtype, expected):
    q = mx.zeros((1, 8, 1024, head_dim), mx.bfloat16)
    mask = mx.zeros((1, 1, 1024, 1024), mask_dtype)
    got, reason = fa.route(q, q, q, scale=1.0, mask=mask, stream=mx.gpu)
    assert got == expected, reason
