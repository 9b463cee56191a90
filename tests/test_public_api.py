"""What a user sees of the package: its names, a patch's repr, the status
of every kernel family."""

import mlx.core as mx

import mlx_fused_attn as fa

FAMILIES = {"attention", "short_attention", "attention_backward",
            "attention_backward_row_dot", "neighborhood", "strided_copy",
            "quantized_attention"}  # fmt: skip


def test_dir_lists_the_public_names_only():
    names = dir(fa)
    assert names == sorted(fa.__all__ + ["__version__"])
    assert all(hasattr(fa, n) for n in names)
    assert not {"mx", "warnings", "annotations"} & set(names)
    assert not [n for n in names if n.startswith("_") and n != "__version__"]


def test_a_patch_shows_its_policy_state_and_counts():
    with fa.patch_mx_fast(policy="fused") as patch:
        q = mx.zeros((1, 2, 8, 32))
        mx.eval(mx.fast.scaled_dot_product_attention(q, q, q, scale=1.0))
        assert repr(patch) == (
            "MxFastPatch(policy='fused', active, "
            "stats=PatchStats(fused=1, fallback=0, passed_through=0))"
        )
    assert repr(patch).startswith("MxFastPatch(policy='fused', removed, ")


def test_kernel_status_lists_every_family_on_the_cpu():
    q = mx.zeros((1, 2, 8, 32))
    x = mx.zeros((1, 16, 2, 32))
    kv = mx.quantize(mx.zeros((1, 2, 8, 32)), group_size=32, bits=4)
    mx.eval(fa.scaled_dot_product_attention(q, q, q, scale=1.0, stream=mx.cpu),
            fa.neighborhood_attention(x, x, x, 3, stream=mx.cpu),
            fa.quantized_scaled_dot_product_attention(
                q, kv, kv, 1.0, None, 32, 4, stream=mx.cpu))  # fmt: skip
    cpu = [s for s in fa.kernel_status() if s["device"] == "CPU"]
    assert {s["family"] for s in cpu} == FAMILIES
    by_family = {s["family"]: s for s in cpu}
    for family in ("attention", "neighborhood", "quantized_attention"):
        assert by_family[family]["status"] == "loaded", cpu
        assert by_family[family]["what"] == "CPU kernel" and by_family[family]["reason"] == ""
    for family in ("short_attention", "attention_backward_row_dot", "strided_copy"):
        assert by_family[family]["status"] == "GPU only", cpu
    assert all(s["status"] in {"loaded", "failed", "not loaded yet", "GPU only",
                               "not in this backend"} for s in fa.kernel_status())  # fmt: skip
    gpu = [s for s in fa.kernel_status() if s["device"] != "CPU"]
    assert bool(gpu) == (fa.build_info()["gpu_backend"] != "none")
