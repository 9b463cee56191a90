"""Training under patch_mx_fast: the gradient transforms it wraps mark the
functions they trace, route() reads the mark, the transforms come back on
unpatching, gradients are unchanged, and the CUDA training rule keeps
cuDNN's fused backward (checked without a GPU)."""

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from conftest import rand

import mlx_fused_attn as fa
from mlx_fused_attn import gradient_trace, routing

ORIGINALS = {name: getattr(mx, name) for name in ("grad", "value_and_grad", "vjp")}
ORIGINAL_SDPA = mx.fast.scaled_dot_product_attention


@pytest.fixture(autouse=True)
def unpatched():
    yield
    fa.unpatch_mx_fast()
    mx.fast.scaled_dot_product_attention = ORIGINAL_SDPA
    for name, fun in ORIGINALS.items():
        setattr(mx, name, fun)


def inputs(L=16, D=32, seed=0):
    return tuple(rand((1, 2, L, D), mx.float32, seed + i) for i in range(3))


class Seen:
    """A loss over mx.fast's attention that records route()'s reason for
    each call it makes."""

    def __init__(self):
        self.reasons = []

    def __call__(self, q, k, v):
        self.reasons.append(fa.route(q, k, v, scale=0.25).reason)
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.25, mask="causal")
        return (out * out).sum()

    def training(self):
        return ["training" in r for r in self.reasons]


def test_each_transform_marks_the_traced_function():
    q, k, v = inputs()
    loss = Seen()
    with fa.patch_mx_fast():
        mx.eval(mx.grad(loss, argnums=(0, 1, 2))(q, k, v))
        mx.eval(mx.value_and_grad(loss)(q, k, v))
        mx.eval(mx.vjp(lambda q: loss(q, k, v), [q], [mx.array(1.0)]))
        loss(q, k, v)  # outside a transform
    assert loss.training() == [True, True, True, False]
    # Unpatched, the transforms are MLX's and mark nothing.
    mx.eval(mx.grad(loss)(q, k, v))
    assert loss.training()[-1] is False
    assert not gradient_trace.active()


def test_nn_value_and_grad_made_inside_the_patch_is_marked():
    q, k, v = inputs()
    loss = Seen()
    model = nn.Linear(32, 32)

    def model_loss(x):
        return loss(model(x), k, v)

    with fa.patch_mx_fast():
        mx.eval(nn.value_and_grad(model, model_loss)(q))
    assert loss.training() == [True]


def test_made_before_the_patch_is_not_marked():
    """Documented limit: the transform ran before the patch, so the
    function it traces is MLX's own."""
    q, k, v = inputs()
    loss = Seen()
    step = mx.value_and_grad(loss)
    with fa.patch_mx_fast():
        mx.eval(step(q, k, v))
    assert loss.training() == [False]


def test_nested_transforms_count_and_unwind():
    q, k, v = inputs()
    depths = []

    def inner(x):
        depths.append(gradient_trace._state.depth)
        return (mx.fast.scaled_dot_product_attention(x, k, v, scale=0.25) ** 2).sum()

    def outer(x):
        return mx.grad(inner)(x).sum()

    with fa.patch_mx_fast():
        mx.eval(mx.grad(outer)(q))
        assert not gradient_trace.active()
    assert depths == [2]


def test_the_mark_ends_when_the_function_raises():
    def failing(x):
        raise ValueError("inside")

    with fa.patch_mx_fast():
        with pytest.raises(ValueError, match="inside"):
            mx.grad(failing)(mx.array(1.0))
    assert not gradient_trace.active()


def test_the_mark_is_the_tracing_threads_alone():
    """A thread that traces marks itself only: another thread's calls in the
    meantime are not training calls, and the mark ends with the trace."""
    import threading

    inside, release, seen = threading.Event(), threading.Event(), {}

    def loss(x):
        seen["tracing thread"] = gradient_trace.active()
        inside.set()
        release.wait(10)
        return (x * x).sum()

    with fa.patch_mx_fast():
        worker = threading.Thread(target=lambda: mx.grad(loss)(mx.array(1.0)))
        worker.start()
        assert inside.wait(10)
        seen["other thread"] = gradient_trace.active()
        release.set()
        worker.join()
    assert seen == {"tracing thread": True, "other thread": False}
    assert not gradient_trace.active() and gradient_trace._running == 0


def test_transforms_installed_while_patched_and_restored():
    outer = fa.patch_mx_fast()
    with fa.patch_mx_fast():
        for name in ORIGINALS:
            assert getattr(mx, name) is getattr(gradient_trace, name)
    # The outer patch still holds them.
    assert mx.grad is gradient_trace.grad
    outer.remove()
    for name, fun in ORIGINALS.items():
        assert getattr(mx, name) is fun
    fa.patch_mx_fast()
    assert fa.unpatch_mx_fast()
    for name, fun in ORIGINALS.items():
        assert getattr(mx, name) is fun


def test_transform_replaced_after_patching_is_left_in_place():
    patch = fa.patch_mx_fast()

    def theirs(fun, *args, **kwargs):
        return gradient_trace.grad(fun, *args, **kwargs)

    mx.grad = theirs
    with pytest.warns(RuntimeWarning, match=r"mx\.grad was replaced after patch_mx_fast"):
        patch.remove()
    assert mx.grad is theirs
    assert mx.value_and_grad is ORIGINALS["value_and_grad"]
    # Ours still works under theirs, with MLX's behind it.
    assert mx.grad(lambda x: x * x)(mx.array(3.0)).item() == 6.0


def test_gradients_unchanged_by_the_patch():
    q, k, v = inputs(L=40, D=32, seed=3)
    mask = rand((1, 1, 40, 40), mx.float32, 9)

    def loss(q, k, v):
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.2, mask=mask)
        return (out * out).sum()

    want = mx.grad(loss, argnums=(0, 1, 2))(q, k, v)
    with fa.patch_mx_fast() as patch:
        got = mx.grad(loss, argnums=(0, 1, 2))(q, k, v)
        mx.eval(got)
    assert patch.stats.fused == 1
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=2e-4, atol=2e-5)


def test_explicit_training_argument():
    q, k, v = inputs()
    assert "training" in fa.route(q, k, v, scale=0.25, training=True).reason
    assert "training" not in fa.route(q, k, v, scale=0.25, training=False).reason


def on_cuda(monkeypatch, measured=None, trained=None):
    """route() as on a CUDA GPU, with ``measured`` as the tuned table's or
    the defaults' answer for every forward class and ``trained`` for every
    class of training steps."""
    monkeypatch.setattr(routing, "_gpu_backend", lambda: "cuda")
    monkeypatch.setattr(routing, "_device", lambda stream: mx.Device(mx.gpu))
    monkeypatch.setattr(
        routing, "_measured", lambda *args: trained if args[-1] else measured
    )


@pytest.mark.parametrize(
    "L, D, dtype, mask, expected",
    [
        (4096, 128, mx.bfloat16, None, routing.PASSTHROUGH),  # cuDNN both ways
        (2048, 128, mx.bfloat16, "causal", routing.PASSTHROUGH),
        (1024, 64, mx.bfloat16, "causal", routing.PASSTHROUGH),
        (2048, 64, mx.float16, "additive", routing.PASSTHROUGH),  # cuDNN's bias
        (2048, 64, mx.float16, "bool", routing.FUSED),  # made additive at [B, H, L, L]
        (1000, 128, mx.bfloat16, None, routing.FUSED),  # L_q % 128: plain-ops gradient
        (2048, 256, mx.bfloat16, None, routing.FUSED),  # past cuDNN's head dims
        (1024, 128, mx.float32, "causal", routing.PASSTHROUGH),  # TF32 plain ops, as inference
        (64, 64, mx.float32, "causal", routing.FUSED),  # the short kernel, plain-ops gradient
    ],
)
def test_cuda_training_rule(monkeypatch, L, D, dtype, mask, expected):
    on_cuda(monkeypatch)
    q = mx.zeros((1, 4, L, D), dtype)
    if mask in ("additive", "bool"):
        mask = mx.zeros((1, 1, L, L), mx.bool_ if mask == "bool" else dtype)
    choice, reason = fa.route(q, q, q, scale=1.0, mask=mask, training=True)
    assert (choice, reason[:15]) == (expected, "CUDA, training:"), reason
    assert fa.route(q, q, q, scale=1.0, mask=mask, training=True).source == routing.RULE


def test_cuda_training_ignores_forward_measurements(monkeypatch):
    """Forward classes (the shipped defaults, a forward's tuning) decide
    inference calls only; a tuned class of training steps decides training
    calls, before the rule (H100: the rule's cuDNN gradient 635 us against
    ours 575 at this shape)."""
    from mlx_fused_attn.candidates import Candidate

    measured = (routing.TUNED, Candidate("fused"), "tuned: fused")
    on_cuda(monkeypatch, measured)
    q = mx.zeros((1, 4, 2048, 128), mx.bfloat16)
    assert fa.route(q, q, q, scale=1.0, mask="causal").source == routing.TUNED
    trained = fa.route(q, q, q, scale=1.0, mask="causal", training=True)
    assert (trained.choice, trained.source) == (routing.PASSTHROUGH, routing.RULE)
    routing._routes.clear()
    on_cuda(monkeypatch, trained=measured)
    trained = fa.route(q, q, q, scale=1.0, mask="causal", training=True)
    assert (trained.choice, trained.source) == (routing.FUSED, routing.TUNED)


def test_cuda_training_inside_a_patched_gradient(monkeypatch):
    """The flag reaches the rule through mx.value_and_grad (route() is asked
    inside the traced function, nothing runs on a GPU): bf16 L_q = 1000
    goes to mx.fast (cuDNN) as inference and to ours in training, where
    mx.fast's gradient would be plain ops; L_q = 1024 keeps cuDNN both ways."""
    on_cuda(monkeypatch)
    seen = []

    def loss(q):
        seen.append(fa.route(q, q, q, scale=1.0, mask="causal").choice)
        return q.sum()

    with fa.patch_mx_fast():
        for L in (1000, 1024):
            q = mx.zeros((1, 4, L, 128), mx.bfloat16)
            mx.eval(mx.value_and_grad(loss)(q))
            loss(q)
    assert seen == [routing.FUSED, routing.PASSTHROUGH, routing.PASSTHROUGH, routing.PASSTHROUGH]
