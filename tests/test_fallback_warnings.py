"""MLX_FUSED_ATTN_WARN_FALLBACK=1 warns once for each distinct reason a call
ran as plain MLX ops (a FallbackWarning); without it, and for fused calls,
nothing is said. Each case runs in a fresh process: the extension remembers
the reasons it reported for the process."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    r"""
    import json, warnings
    import mlx.core as mx
    import mlx_fused_attn as fa

    mx.set_default_device(mx.cpu)  # float64 exists only on the CPU

    def qkv(dtype, shape=(1, 2, 16, 32)):
        x = mx.random.normal(shape, key=mx.random.key(0)).astype(dtype)
        return x, x, x

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # the same reason three times
            fa.scaled_dot_product_attention(*qkv(mx.float64), scale=0.1, stream=mx.cpu)
        fa.scaled_dot_product_attention(*qkv(mx.float32, (1, 2, 0, 32)), scale=0.1, stream=mx.cpu)
        fa.scaled_dot_product_attention(*qkv(mx.float16), scale=0.1, stream=mx.cpu)
        x = mx.zeros((1, 8, 2, 32), mx.float64)
        fa.neighborhood_attention(x, x, x, 3, stream=mx.cpu)
        fa.neighborhood_attention(x.astype(mx.float16), x, x, 3, stream=mx.cpu)
    print(json.dumps([(w.category.__name__, str(w.message)) for w in caught]))
    """
)


def run_child(switch):
    env = dict(os.environ)
    env.pop("MLX_FUSED_ATTN_WARN_FALLBACK", None)
    if switch is not None:
        env["MLX_FUSED_ATTN_WARN_FALLBACK"] = switch
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_each_distinct_reason_warns_once():
    caught = run_child("1")
    assert [category for category, _ in caught] == ["FallbackWarning"] * 3, caught
    sdpa_f64, sdpa_empty, na_f64 = (message for _, message in caught)
    assert sdpa_f64.startswith(
        "mlx_fused_attn: scaled_dot_product_attention ran as plain MLX ops on the CPU"
    )
    assert "float64" in sdpa_f64
    assert "empty" in sdpa_empty
    assert na_f64.startswith("mlx_fused_attn: neighborhood_attention ran as plain MLX ops")


@pytest.mark.parametrize("switch", [None, "0"], ids=["unset", "zero"])
def test_silent_unless_switched_on(switch):
    assert run_child(switch) == []
