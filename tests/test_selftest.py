"""`python -m mlx_fused_attn.selftest`, what a Mac user runs first: on the
CPU its quick grid passes and prints the table and a verdict; a wrong result
(injected through its test-only hook) fails it; a kernel family broken by
MLX_FUSED_ATTN_BREAK_FAMILY falls back with the reason shown and passes."""

import json
import os
import subprocess
import sys

import mlx.core as mx
import pytest

HOOKS = ("MLX_FUSED_ATTN_SELFTEST_CORRUPT", "MLX_FUSED_ATTN_BREAK_FAMILY")
FAMILIES = ("attention", "short_attention", "neighborhood", "strided_copy", "quantized_attention")


def selftest(*args, **env):
    clean = {k: v for k, v in os.environ.items() if k not in HOOKS}
    return subprocess.run(
        [sys.executable, "-m", "mlx_fused_attn.selftest", *args],
        env={**clean, **env}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def verdict(r):
    lines = [s for s in r.stdout.splitlines() if s.startswith("VERDICT: ")]
    assert len(lines) == 1, r.stdout + r.stderr
    return lines[0]


def test_quick_cpu_passes_with_a_table(tmp_path):
    out = tmp_path / "results.json"
    r = selftest("--quick", "--device", "cpu", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    (header,) = [s for s in r.stdout.splitlines() if s.startswith("family ")]
    for column in ("family", "case", "dtype", "fused?", "max err", "tol", "ok", "ms ours",
                   "ms mx.fast", "fast/ours"):  # fmt: skip
        assert column in header, header
    for line in ("device:         cpu", "build:          gpu_backend=", "mlx:"):
        assert line in r.stdout, r.stdout
    # Strict JSON: a bare NaN (Python's default for a float) is refused.
    results = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"JSON holds {c}"))
    assert verdict(r) == f"VERDICT: PASS: all {len(results['results'])} results right, all fused"
    assert results["passed"] and results["warnings"] == []
    cases = results["results"]
    assert {c["family"] for c in cases} == set(FAMILIES)
    assert {c["dtype"] for c in cases} == {"float16", "bfloat16", "float32"}
    # Every case ran fused on the CPU, was right and was timed.
    assert all(c["ok"] and c["fused"] and c["ms_ours"] > 0 for c in cases), cases


def test_wrong_result_fails():
    r = selftest("--quick", "--device", "cpu", MLX_FUSED_ATTN_SELFTEST_CORRUPT="1")
    assert r.returncode == 1, r.stdout + r.stderr
    assert verdict(r).startswith("VERDICT: FAIL: 1 of "), verdict(r)
    assert "FAIL" in r.stdout.split("VERDICT")[0]


def test_broken_family_falls_back_with_the_reason():
    r = selftest("--quick", "--device", "cpu", MLX_FUSED_ATTN_BREAK_FAMILY="attention")
    assert r.returncode == 0, r.stdout + r.stderr
    line = verdict(r)
    assert line.startswith("VERDICT: PASS: all ") and "FELL BACK" in line, line
    # The reason, the failed family and the one RuntimeWarning are shown.
    assert "attention kernel family is unavailable" in r.stdout, r.stdout
    assert "kernel families that could not be built or loaded:\n  attention on CPU" in r.stdout
    assert r.stdout.count("RuntimeWarning: mlx_fused_attn: the attention kernels") == 1


@pytest.mark.skipif(mx.is_available(mx.gpu), reason="this machine has a GPU")
def test_missing_device_is_a_usage_error():
    r = selftest("--device", "gpu")
    assert r.returncode == 2 and "no gpu device" in r.stderr, r.stderr
