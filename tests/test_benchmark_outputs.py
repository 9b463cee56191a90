"""What the benchmarks write is read by other tools: JSON that any parser
accepts (a time not measured is null, never a bare NaN), times in ms under
keys that say so, and CSV rows with the same keys."""

import contextlib
import csv
import json
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]


def strict_load(path):
    """The JSON at `path`, refusing the NaN and Infinity Python's own json
    would accept (as `python -m json.tool` does too)."""

    def refuse(constant):
        raise ValueError(f"{path.name} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def bench(script, *args, tmp_path):
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), "--device", "cpu", *map(str, args)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_sdpa_bench_writes_strict_json_and_csv(tmp_path):
    # Past --skip-unfused-above the unfused time is not measured: null.
    out = bench("sdpa_bench.py", "--qsl", "16", "32", "--hdim", "32", "--n-qh", "2",
                "--skip-unfused-above", "16", "--json", "r.json", "--csv", "r.csv",
                tmp_path=tmp_path)
    assert "GFLOP/s" in out and "TFLOP/s" not in out, out
    assert "diff%" not in out, out
    data = strict_load(tmp_path / "r.json")
    rows = data["rows"]
    assert [r["qsl"] for r in rows] == [16, 32]
    assert rows[0]["t_unfs_ms"] > 0 and rows[1]["t_unfs_ms"] is None
    assert rows[1]["vs_unfs"] is None and rows[1]["vs_fast"] > 0
    assert all(r["t_fuse_ms"] > 0 and r["gflops_fuse"] > 0 for r in rows)
    with open(tmp_path / "r.csv", newline="") as f:
        assert list(csv.DictReader(f))[0].keys() == rows[0].keys()
    subprocess.run([sys.executable, "-m", "json.tool", str(tmp_path / "r.json")],
                   check=True, capture_output=True)


def test_na_bench_takes_shapes_and_writes_strict_json_and_csv(tmp_path):
    bench("na_bench.py", "--spatial", "8x8", "32", "--kernel", "3", "--heads", "2",
          "--hdim", "32", "--no-dense", "--json", "r.json", "--csv", "r.csv",
          tmp_path=tmp_path)
    rows = strict_load(tmp_path / "r.json")["rows"]
    assert [(r["spatial"], r["H"], r["D"], r["kernel"]) for r in rows] == [
        ("8x8", 2, 32, 3), ("32", 2, 32, 3)]
    assert all(r["t_fused_ms"] > 0 and r["t_dense_ms"] is None for r in rows), rows
    with open(tmp_path / "r.csv", newline="") as f:
        written = list(csv.DictReader(f))
    assert [r["t_dense_ms"] for r in written] == ["", ""]


@pytest.mark.parametrize("text", ["0x8", "8x8x8x8", "eight"])
def test_na_bench_rejects_a_bad_extent(tmp_path, text):
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "na_bench.py"), "--spatial", text],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 2 and "--spatial takes 1 to 3 positive lengths" in r.stderr, r.stderr


def test_strict_json_writes_null_for_non_finite_floats(tmp_path):
    from mlx_fused_attn import _strict_json

    path = tmp_path / "x.json"
    _strict_json.dump({"a": float("nan"), "b": [1.5, float("inf"), (float("-inf"),)]}, path)
    assert strict_load(path) == {"a": None, "b": [1.5, None, [None]]}


def test_ab_bench_flags_a_row_past_two_percent_and_one_that_did_not_run():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import ab_bench
    finally:
        sys.path.pop(0)
    rounds = {
        "base": [{"a": 10.0, "b": 10.0, "c": 10.0}, {"a": 11.0, "b": 10.4, "c": 10.0}],
        "new": [{"a": 10.1, "b": 10.3, "c": None}, {"a": 10.2, "b": 10.5, "c": None}],
    }
    rows = {r[0]: r for r in ab_bench.compare(rounds)}
    # a: 10.1 / 10.0 within 2% (the minimum of each build's rounds);
    # b: 10.3 / 10.0 past it; c: the new build never ran it.
    assert rows["a"][3] == pytest.approx(1.01) and rows["a"][-1]
    assert rows["a"][4] == pytest.approx(0.1)
    assert rows["b"][3] == pytest.approx(1.03) and not rows["b"][-1]
    assert not rows["c"][-1]


def test_model_bench_compares_three_attentions_in_strict_json(tmp_path, monkeypatch):
    """A tiny mlx-lm Llama from a config: generation and a LoRA step under
    mx.fast, auto (tuned first, into this test's own table) and fused."""
    pytest.importorskip("mlx_lm")
    monkeypatch.setenv("MLX_FUSED_ATTN_TUNED_FILE", str(tmp_path / "tuned.json"))
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "rms_norm_eps": 1e-5}))  # fmt: skip
    out = bench("model_bench.py", "--config", "config.json", "--layers", "1", "--prompt", "16",
                "--gen", "3", "--train-len", "8", "--vocab", "100", "--dtype", "float32",
                "--tune", "--json", "r.json", tmp_path=tmp_path)  # fmt: skip
    assert "| auto |" in out and "LoRA step" in out, out
    data = strict_load(tmp_path / "r.json")
    assert list(data["runs"]) == ["mx.fast", "auto", "fused"]
    for name, run in data["runs"].items():
        assert run["prefill_s"] > 0 and run["decode_s"] > 0 and run["lora_step_s"] > 0, name
        assert run["tokens_agree"] == 3, name  # float32: the same greedy tokens
    assert data["runs"]["mx.fast"]["calls"] is None
    assert data["runs"]["fused"]["calls"].endswith("/ 0 / 0")
    # The CPU's tuned table covers the benchmark's calls: auto reads it.
    assert {r["source"] for r in data["routes"]["auto"].values()} == {"tuned"}
    assert {c for r in data["tuned"] for c in r["calls"]} >= {
        "prompt: B=1 H=4/2 Lq=15 Lk=15 D=16 float32 causal"}


def test_model_bench_generates_into_a_quantized_cache(tmp_path, monkeypatch):
    """--kv-bits: the generation fills mlx-lm's QuantizedKVCache, whose
    attention the patch sends to the quantized kernel (the prompt and every
    decode step, each layer), and the table gives memory beside time."""
    pytest.importorskip("mlx_lm")
    monkeypatch.setenv("MLX_FUSED_ATTN_TUNED_FILE", str(tmp_path / "tuned.json"))
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "head_dim": 32,
        "num_key_value_heads": 2, "intermediate_size": 128, "rms_norm_eps": 1e-5}))  # fmt: skip
    out = bench("model_bench.py", "--config", "config.json", "--layers", "2", "--prompt", "40",
                "--gen", "3", "--train-len", "0", "--vocab", "100", "--dtype", "float32",
                "--kv-bits", "4", "--kv-group-size", "32", "--attention", "mx.fast,fused",
                "--json", "r.json", tmp_path=tmp_path)  # fmt: skip
    assert "QuantizedKVCache(4 bits, groups of 32)" in out and "K/V cache MiB" in out, out
    data = strict_load(tmp_path / "r.json")
    assert data["config"]["kv_bits"] == 4 and data["config"]["kv_group_size"] == 32
    # 2 layers x (the prompt + 3 steps), all fused.
    assert data["runs"]["fused"]["calls"] == "8 / 0 / 0"
    for name, run in data["runs"].items():
        assert run["prefill_peak_mib"] > 0 and run["kv_cache_mib"] > 0, name
        assert run["tokens_agree"] == 3, name
    # Both ran the same cache: 4-bit codes with a scale and a bias each 32.
    assert data["runs"]["fused"]["kv_cache_mib"] == data["runs"]["mx.fast"]["kv_cache_mib"]


def test_training_step_of_each_routing_agrees_and_auto_is_marked(monkeypatch):
    """gpu_bench.py --routing's training rows (benchmarks/training_step.py)
    on the CPU: the three routings give one loss and one set of gradients,
    and auto's step, made inside the patch, reaches route() as training."""
    import mlx.core as mx
    import numpy as np

    import mlx_fused_attn as fa
    from mlx_fused_attn import patching, routing

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import training_step
    finally:
        sys.path.pop(0)
    seen = []

    def spy(*args, **kwargs):
        seen.append(routing.route(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(patching, "route", spy)
    original = mx.fast.scaled_dot_product_attention
    shape = (1, 4, 40, 32)
    q, k, v = (mx.random.normal(shape, key=mx.random.key(i)).astype(mx.float16) for i in range(3))
    mask = mx.random.normal((1, 1, 40, 40), key=mx.random.key(3)).astype(mx.float16)
    results = {}
    for name in training_step.ROUTINGS:
        with fa.patch_mx_fast() if name == "auto" else contextlib.nullcontext():
            make = training_step.gradient_step(name, original, q, k, v, scale=0.2, mask=mask)
            results[name] = [np.array(x.astype(mx.float32)) for x in make()]
    assert mx.fast.scaled_dot_product_attention is original
    assert [(r.choice, "training" in r.reason) for r in seen] == [(routing.FUSED, True)]
    for name in ("fused", "auto"):
        for got, want in zip(results[name], results["mx_fast"]):
            np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    with pytest.raises(ValueError, match="routing must be one of"):
        training_step.gradient_step("cudnn", original, q, k, v, scale=0.2, mask=mask)
