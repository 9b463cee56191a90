"""A training step of one attention call, as `gpu_bench.py --routing` times
it (issue 42: patch_mx_fast must not make a training step slower than
mx.fast): the loss sum(attention(q, k, v)^2) and its gradients with respect
to q, k and v, from one `mx.value_and_grad`, for the three routings of the
routing table. Without torch, so that the CPU tests run it.

`auto` looks mx.fast's function up when the step is traced and makes its
gradient function with `mx.value_and_grad` as found then: call
`gradient_step` inside `patch_mx_fast()` for the patched function and the
patched transform (which marks the trace as training; a gradient function
made before the patch is not marked).
"""

import mlx.core as mx

import mlx_fused_attn as fa

ROUTINGS = ("fused", "mx_fast", "auto")


def attention_for(routing, original):
    """The attention function a routing's step differentiates; `original`
    is mx.fast's own function, saved before any patch."""
    if routing == "fused":
        return fa.scaled_dot_product_attention
    if routing == "mx_fast":
        return original
    if routing == "auto":
        return lambda *args, **kwargs: mx.fast.scaled_dot_product_attention(*args, **kwargs)
    raise ValueError(f"[gradient_step] routing must be one of {', '.join(ROUTINGS)}; got {routing!r}")


def gradient_step(routing, original, q, k, v, *, scale, mask):
    """make(): one training step of the routing's attention on (q, k, v),
    returning [loss, dq, dk, dv] for one evaluation (each call traces the
    step again, as MLX does for an uncompiled gradient function)."""
    attention = attention_for(routing, original)

    def loss(q, k, v):
        out = attention(q, k, v, scale=scale, mask=mask)
        return (out.astype(mx.float32) ** 2).sum()

    step = mx.value_and_grad(loss, argnums=(0, 1, 2))

    def make():
        value, grads = step(q, k, v)
        return [value, *grads]

    return make
