"""The Metal kernel's variants (MLX_FUSED_ATTN_METAL_VARIANT,
mlx_fused_attn/families/attention/metal/attention_variant.h) through the op: on a Mac's
GPU each variant, alone and combined, against the reference on ragged
shapes with masks, causal and GQA; a variable that names no variant is a
ValueError naming the accepted words. Other devices ignore the variable.
Also benchmarks/sdpa_bench.py --metal-variants where there is no Metal.

The kernels themselves are checked without a Mac by the emulator
(tests/metal_emu/test_metal_variants.py).
"""

import os

import mlx.core as mx
import pytest

import mlx_fused_attn as fa
from conftest import DEVICES, REPO, assert_close, device_params, rand

VARIABLE = "MLX_FUSED_ATTN_METAL_VARIANT"
VARIANTS = ["", "stride32", "bk32", "q_threadgroup", "q_threadgroup,bk32,stride32", "q_registers,bk16,stride64"]
ON_METAL = fa.build_info()["gpu_backend"] == "metal" and mx.gpu in DEVICES


@device_params()
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_variants_agree_with_the_reference(device, variant, dtype, monkeypatch):
    monkeypatch.setenv(VARIABLE, variant)
    q = rand((1, 4, 65, 128), dtype, 1)
    k = rand((1, 2, 127, 128), dtype, 2)
    v = rand((1, 2, 127, 128), dtype, 3)
    for mask in (None, "causal", rand((65, 127), mx.float32, 4) > 0):
        out = fa.scaled_dot_product_attention(q, k, v, scale=128**-0.5, mask=mask, stream=device)
        assert_close(out, q, k, v, 128**-0.5, mask, what=f"{VARIABLE}={variant!r} mask={mask!r}")
    if device == mx.gpu and ON_METAL:
        # The pipelines built for the calls: the variant's kernel and constant.
        name = f"fa_attention_{'float16' if dtype == mx.float16 else 'bfloat16'}_d128_dv128_bq32_bk" + (
            "32" if "bk32" in variant else "16") + "_wm4" + ("_qs" if "q_threadgroup" in variant else "") + "_"
        built = [s["what"] for s in fa.kernel_status() if s["what"].startswith(name)]
        assert any(("_stride32_t" in b) == ("stride32" in variant) for b in built), (variant, built)


@pytest.mark.skipif(not ON_METAL, reason="the variable is read by the Metal backend only")
@pytest.mark.parametrize("text", ["q_shared", "bk64", "bk16,bk32"])
def test_a_variable_naming_no_variant_is_a_value_error(text, monkeypatch):
    monkeypatch.setenv(VARIABLE, text)
    q = rand((1, 2, 100, 128), mx.float16, 5)
    with pytest.raises(ValueError, match="q_registers or q_threadgroup, bk16 or bk32, stride64 or stride32"):
        mx.eval(fa.scaled_dot_product_attention(q, q, q, scale=1.0, stream=mx.gpu))


@pytest.mark.skipif(ON_METAL, reason="on Metal the benchmark times the variants")
def test_the_benchmark_says_there_is_nothing_to_time_without_metal(capsys, monkeypatch):
    # On the path for the call too: main imports its sibling quantized_cache.
    monkeypatch.syspath_prepend(os.path.join(REPO, "benchmarks"))
    import sdpa_bench

    device = mx.default_device()
    try:
        assert sdpa_bench.main(["--metal-variants", "--device", "cpu"]) == 0
    finally:
        # main() sets MLX's default device; later tests in this process need theirs.
        mx.set_default_device(device)
    assert "nothing to time (run it on a Mac)" in capsys.readouterr().out
