"""tune(), the tuned table and the tune CLI, on the CPU with an injected
clock: the faster candidate wins, the table is written and read, a change
of device or version invalidates it, a corrupt file warns and is ignored,
and patch_mx_fast runs what the table says."""

import json
import os
import subprocess
import sys

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from mlx_fused_attn import candidates, routing, tuned_table, tuning
from mlx_fused_attn.plans import PlanHint
from mlx_fused_attn.shape_class import ShapeClass, bucket, shape_class

CPU = mx.Device(mx.cpu)
SMALL = tuning.Call(1, 2, 2, 16, 16, 32, 32, "float32", "causal")
LARGER = SMALL._replace(L_q=64, L_k=64)


@pytest.fixture(autouse=True)
def table_file(tmp_path, monkeypatch):
    """A tuned table of this test's own, read afresh."""
    path = tmp_path / "tuned.json"
    monkeypatch.setenv(tuned_table.PATH_VARIABLE, str(path))
    tuned_table.forget()
    yield path
    tuned_table.forget()


class ScriptedClock:
    """A clock whose readings make the n-th timed evaluation wait
    ``durations[n]`` seconds for its result after a submission of
    ``submissions[n]`` (default 0) seconds (tune reads it before the
    submission, after it and after the wait)."""

    def __init__(self, durations, submissions=None):
        self.durations = list(durations)
        self.submissions = list(submissions or [0.0] * len(self.durations))
        self.now = 0.0
        self.readings = 0

    def __call__(self):
        run, reading = divmod(self.readings, 3)
        if reading == 1:
            self.now += self.submissions[run]
        elif reading == 2:
            self.now += self.durations[run]
        self.readings += 1
        return self.now


def in_turn(fused, fast):
    """The durations of three timed runs of each CPU candidate (the fused
    kernel, then mx.fast) in the order tune reads them: in turn."""
    return [t for pair in zip(fused, fast) for t in pair]


def tune_small(durations, calls=(SMALL,), **kw):
    """tune() on the CPU with warm-up off and three repeats a candidate,
    timed by `durations` in the order the runs take turns (``in_turn``)."""
    clock = ScriptedClock(durations)
    results = tuning.tune(list(calls), device=CPU, warmup=0, repeats=3, budget_s=1e9,
                          clock=clock, **kw)  # fmt: skip
    assert clock.readings == 3 * len(durations), "every timed run read the clock three times"
    return results


@pytest.mark.parametrize(
    "fused, fast, winner",
    [([1e-3, 5e-3, 2e-3], [4e-3] * 3, "fused"), ([9e-3] * 3, [1e-3, 3e-3, 2e-3], "mx.fast")],
)
def test_the_faster_candidate_wins_by_its_median(fused, fast, winner):
    (result,) = tune_small(in_turn(fused, fast), save=False)
    assert result.shape_class == SMALL.shape_class()
    medians = {"fused": 1e6 * sorted(fused)[1], "mx.fast": 1e6 * sorted(fast)[1]}
    assert result.us == pytest.approx(medians)
    assert result.winner == winner
    assert result.speedup() == pytest.approx(result.us["mx.fast"] / result.us[winner])


def test_a_candidate_far_behind_at_a_smaller_class_is_not_timed_again():
    # SMALL: fused 1 ms, mx.fast 5 ms (5x behind); LARGER: the fused kernel only.
    results = tune_small(in_turn([1e-3] * 3, [5e-3] * 3) + [2e-3] * 3, calls=(LARGER, SMALL),
                         save=False, prune=4.0)  # fmt: skip
    small, larger = results
    assert small.shape_class == SMALL.shape_class() and set(small.us) == {"fused", "mx.fast"}
    assert larger.us == pytest.approx({"fused": 2000.0}) and "mx.fast" in larger.skipped
    assert "5.0x slower" in larger.skipped["mx.fast"]


def test_candidates_take_turns():
    """One timed run of each candidate a round: a drift of the device (or
    what the first candidate leaves behind) falls on all alike."""
    order = []

    def run(name):
        def go():
            order.append(name)
            return mx.ones((4,)) * 2
        return go

    medians = tuning.medians_in_turn({"a": run("a"), "b": run("b")}, warmup=1, repeats=3,
                                     budget_s=1e9, clock=ScriptedClock([1, 5, 2, 6, 3, 7]))  # fmt: skip
    assert order == ["a", "b"] + ["a", "b"] * 3
    assert medians == {"a": 2, "b": 6}


def test_a_timed_run_chains_dependent_calls():
    q = mx.full((1, 2, 4, 8), 3.0)
    seen = []

    def step(x):
        seen.append(x)
        return x * 0.5

    run, calls = tuning.chained(step, q, 4)
    seen.clear()
    out = run()
    # Each call takes the previous one's output: one after another.
    assert calls == 4 and len(seen) == 4 and seen[0] is q
    assert np.allclose(np.array(out), 3.0 / 16)
    # An output of another shape (v's head dim unlike q's) cannot feed the next.
    assert tuning.chained(lambda x: x[..., :4], q, 4)[1] == 1


@pytest.mark.parametrize(
    "us, winner",
    [({"fused": 101.0, "fused[splits<=2]": 100.0, "mx.fast": 120.0}, "fused"),
     ({"fused": 109.0, "fused[splits<=2]": 100.0, "mx.fast": 120.0}, "fused"),
     ({"fused": 115.0, "fused[splits<=2]": 100.0, "mx.fast": 120.0}, "fused[splits<=2]"),
     ({"fused": 101.0, "mx.fast": 100.0}, "mx.fast")],
)  # fmt: skip
def test_a_hinted_plan_must_beat_the_planners_own_by_the_margin(us, winner):
    assert tuning._winner({name: [t] for name, t in us.items()}) == winner


def test_a_class_goes_to_the_candidate_least_behind_on_its_worst_call():
    """One routing decision serves every call of a class: a candidate 3%
    behind on a long call and 3x ahead on a short one wins, though its
    summed time is the larger."""
    dense, causal = SMALL._replace(mask="additive"), SMALL._replace(mask="additive-causal")
    assert dense.shape_class() == causal.shape_class()
    # Timed candidate by candidate, call by call: fused, then mx.fast.
    fused, fast = [1030e-3, 10e-3], [1000e-3, 30e-3]
    (result,) = tune_small([t for f, m in zip(fused, fast) for t in in_turn([f] * 3, [m] * 3)],
                           calls=(dense, causal), save=False)  # fmt: skip
    assert result.per_call["fused"] == pytest.approx([1030e3, 10e3])
    assert result.per_call["mx.fast"] == pytest.approx([1000e3, 30e3])
    assert result.us["fused"] > result.us["mx.fast"]
    assert result.winner == "fused"
    # Equally far behind on their worst calls: the least summed time wins.
    assert tuning._winner({"fused": [2.0, 1.0, 1.0], "mx.fast": [1.0, 2.0, 2.0]}) == "fused"
    assert tuning._winner({"fused": [2.0, 2.0, 1.0], "mx.fast": [1.0, 1.0, 2.0]}) == "mx.fast"


def test_a_sample_is_the_wait_after_the_submission(monkeypatch):
    """The clock times the wait for a run after its submission: on a GPU
    the host's encoding would rank near ties by host work."""
    events = []
    submit = mx.async_eval

    def recording_submit(*arrays):
        events.append("submit")
        submit(*arrays)

    clock = ScriptedClock([3.0, 4.0], submissions=[1.0, 1.0])

    def recording_clock():
        events.append("clock")
        return clock()

    monkeypatch.setattr(mx, "async_eval", recording_submit)
    (median,) = tuning.medians_in_turn({0: lambda: mx.ones((4,)) * 2}, warmup=0, repeats=2,
                                   budget_s=1e9, clock=recording_clock).values()  # fmt: skip
    assert events == ["clock", "submit", "clock", "clock"] * 2
    assert median == pytest.approx(3.5)


def test_a_wait_shorter_than_its_submission_adds_the_submission():
    """A run of many operations starts on the device while the host still
    encodes it (MLX commits every 20 on CUDA): its wait alone is the tail."""
    clock = ScriptedClock([0.1, 0.1, 0.1], submissions=[2.0, 2.0, 2.0])
    (median,) = tuning.medians_in_turn({0: lambda: mx.ones((4,)) * 2}, warmup=0, repeats=3,
                                   budget_s=1e9, clock=clock).values()  # fmt: skip
    assert median == pytest.approx(2.1)


def test_a_short_call_is_timed_again_in_a_chain_counted_per_call():
    # Both candidates in turn: three runs of the call alone, then three of a chain of 3.
    alone = [tuning.ALONE_SECONDS / 2] * 3
    (result,) = tune_small(in_turn(alone, alone) + in_turn([3e-4] * 3, [6e-4] * 3), save=False,
                           chain=3)  # fmt: skip
    assert result.us == pytest.approx({"fused": 1e2, "mx.fast": 2e2})


def test_a_long_call_is_timed_alone():
    """A chain would overlap the parts of a long call that do not wait for
    its queries; alone, each candidate runs as the benchmarks time it."""
    alone = tuning.ALONE_SECONDS
    (result,) = tune_small(in_turn([alone] * 3, [2 * alone] * 3), save=False, chain=3)
    assert result.us == pytest.approx({"fused": 1e6 * alone, "mx.fast": 2e6 * alone})


def test_the_budget_ends_the_timed_runs():
    # In turn: fused 2.0 s, mx.fast 0.5 s, then mx.fast alone 0.6 s.
    clock = ScriptedClock([2.0, 0.5, 0.6])
    (result,) = tuning.tune([SMALL], device=CPU, warmup=0, repeats=5, budget_s=1.0,
                            clock=clock, save=False)  # fmt: skip
    # The fused kernel's first run passed the budget, mx.fast's second.
    assert clock.readings == 9
    assert result.us == pytest.approx({"fused": 2e6, "mx.fast": 0.55e6})


def test_the_table_is_written_read_and_routes_calls(table_file):
    tune_small(in_turn([9e-3] * 3, [1e-3] * 3))
    doc = json.loads(table_file.read_text())
    (table,) = doc["tables"]
    assert table["key"] == tuned_table.device_key(CPU)
    assert table["key"]["mlx"] == mx.__version__ and table["key"]["package"] == fa.__version__
    assert list(table["classes"]) == [SMALL.shape_class().key()]
    assert table["classes"][SMALL.shape_class().key()]["winner"] == "mx.fast"

    q, k, v, mask = SMALL.arrays()
    route = fa.route(q, k, v, scale=1.0, mask=mask, stream=mx.cpu)
    assert (route.choice, route.source) == (routing.PASSTHROUGH, routing.TUNED), route
    # Another shape class is not in the table: the CPU's rule.
    other = fa.route(q[:, :, :3], k, v, scale=1.0, stream=mx.cpu)
    assert (other.choice, other.source) == (routing.FUSED, routing.RULE), other
    with fa.patch_mx_fast() as patch:
        mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0, mask=mask, stream=mx.cpu))
    assert patch.stats == fa.PatchStats(fused=0, fallback=0, passed_through=1)

    # A second tune of another class keeps the first.
    tune_small(in_turn([1e-3] * 3, [9e-3] * 3), calls=(LARGER,))
    classes = tuned_table.table_for(CPU).classes
    assert {c: e.winner for c, e in classes.items()} == {
        SMALL.shape_class(): "mx.fast", LARGER.shape_class(): "fused"}  # fmt: skip


def test_training_steps_are_a_class_of_their_own(table_file, monkeypatch):
    """A training call's candidates are timed as training steps (the
    forward and its gradient), in a class that decides training calls only:
    the backward can change the winner."""
    stepped = []
    grad = mx.grad

    def counting_grad(fn, argnums):
        stepped.append(argnums)
        return grad(fn, argnums=argnums)

    monkeypatch.setattr(mx, "grad", counting_grad)
    train = SMALL._replace(training=True)
    assert train.describe().endswith(" training")
    assert tuning.Call.parse("b=1,hq=2,hkv=2,lq=16,lk=16,d=32,dtype=float32,mask=causal,"
                             "train=1") == train._replace(label="")  # fmt: skip
    (result,) = tune_small(in_turn([1e-3] * 3, [9e-3] * 3), calls=(train,))
    assert result.shape_class == train.shape_class() != SMALL.shape_class()
    assert stepped == [(0, 1, 2)] * 2  # one gradient a candidate: fused, mx.fast
    q, k, v, mask = SMALL.arrays()
    trained = fa.route(q, k, v, scale=1.0, mask=mask, stream=mx.cpu, training=True)
    assert (trained.choice, trained.source) == (routing.FUSED, routing.TUNED), trained
    forward = fa.route(q, k, v, scale=1.0, mask=mask, stream=mx.cpu)
    assert forward.source == routing.RULE, forward


def test_a_tuned_plan_hint_reaches_the_kernel(table_file, monkeypatch):
    tuned_table.write(CPU, {SMALL.shape_class(): tuned_table.TunedClass(
        "fused[short=off;splits<=1]", {"fused[short=off;splits<=1]": 1.0}, {}, [])})  # fmt: skip
    q, k, v, mask = SMALL.arrays()
    route = fa.route(q, k, v, scale=0.5, mask=mask, stream=mx.cpu)
    assert route.source == routing.TUNED
    assert route.hint == PlanHint(short_kernel=False, max_key_splits=1)
    seen = []
    fused_call = fa._fused_call

    def spy(*a):
        seen.append(a[-1])  # the hint
        return fused_call(*a)

    monkeypatch.setattr(fa, "_fused_call", spy)
    with fa.patch_mx_fast():
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask=mask, stream=mx.cpu)
    assert seen == [route.hint]
    expected = fa.scaled_dot_product_attention(q, k, v, scale=0.5, mask=mask, stream=mx.cpu)
    np.testing.assert_array_equal(np.array(out), np.array(expected))


@pytest.mark.parametrize("change", ["mlx", "package", "device", "os", "cores"])
def test_a_changed_device_or_version_invalidates_the_table(table_file, monkeypatch, change):
    tune_small(in_turn([9e-3] * 3, [1e-3] * 3))
    assert tuned_table.table_for(CPU) is not None
    if change == "mlx":
        monkeypatch.setattr(mx, "__version__", "0.0.1")
    elif change == "package":
        monkeypatch.setattr(fa, "__version__", "0.0.1")
    elif change == "device":
        info = mx.device_info
        monkeypatch.setattr(mx, "device_info", lambda d: {**info(d), "device_name": "another CPU"})
    elif change == "os":
        monkeypatch.setattr(tuned_table.platform, "release", lambda: "0.0-other")
    else:
        monkeypatch.setattr(tuned_table.os, "cpu_count", lambda: 999)
    tuned_table.forget()
    assert tuned_table.table_for(CPU) is None
    q, k, v, mask = SMALL.arrays()
    assert fa.route(q, k, v, scale=1.0, mask=mask, stream=mx.cpu).source != routing.TUNED
    # The next tune replaces the stale table.
    tune_small(in_turn([1e-3] * 3, [9e-3] * 3))
    (table,) = json.loads(table_file.read_text())["tables"]
    assert table["key"] == tuned_table.device_key(CPU)


@pytest.mark.parametrize(
    "text",
    ["{not json", '{"format": 99, "tables": []}',
     '{"format": 1, "tables": [{"key": {}, "tuned": "x", "classes": {"bogus": {}}}]}'],  # fmt: skip
    ids=["not JSON", "another format", "a malformed class"],
)
def test_a_corrupt_table_warns_and_is_ignored(table_file, text):
    table_file.write_text(text)
    q, k, v, mask = SMALL.arrays()
    with pytest.warns(RuntimeWarning, match="cannot be read"):
        route = fa.route(q, k, v, scale=1.0, mask=mask, stream=mx.cpu)
    assert (route.choice, route.source) == (routing.FUSED, routing.RULE)
    # A tune writes a good one over it.
    with pytest.warns(RuntimeWarning, match="cannot be read"):
        tune_small(in_turn([9e-3] * 3, [1e-3] * 3))
    assert fa.route(q, k, v, scale=1.0, mask=mask, stream=mx.cpu).source == routing.TUNED


def test_the_table_lives_in_the_user_cache_dir(monkeypatch):
    import platformdirs

    monkeypatch.delenv(tuned_table.PATH_VARIABLE)
    assert tuned_table.path() == (
        __import__("pathlib").Path(platformdirs.user_cache_dir("mlx_fused_attn")) / "tuned.json"
    )


@pytest.mark.parametrize(
    "name, hint",
    [
        ("fused", PlanHint()),
        ("fused[short=off]", PlanHint(short_kernel=False)),
        ("fused[splits<=2;metal=q_threadgroup,bk32]", PlanHint(max_key_splits=2,
                                                               metal_variant="q_threadgroup,bk32")),
    ],
)  # fmt: skip
def test_candidate_names_round_trip(name, hint):
    c = candidates.Candidate.parse(name)
    assert (c.kind, c.hint, c.name) == ("fused", hint, name)
    assert candidates.Candidate.parse("mx.fast").kind == candidates.MX_FAST


@pytest.mark.parametrize("name", ["fast", "fused[]", "fused[splits<=0]", "fused[short=on]"])
def test_a_malformed_candidate_name_is_refused(name):
    with pytest.raises(ValueError, match="candidate"):
        candidates.Candidate.parse(name)


def test_cpu_candidates_are_the_kernel_and_mx_fast():
    q, k, v, mask = SMALL.arrays()
    got = candidates.candidates_for(q, k, v, scale=1.0, mask=mask, sinks=None,
                                    stream=mx.cpu, backend="cpu")  # fmt: skip
    assert [c.name for c in got] == ["fused", "mx.fast"]
    # No kernel for float64: mx.fast only.
    q64 = q.astype(mx.float64, stream=mx.cpu)
    got = candidates.candidates_for(q64, q64, q64, scale=1.0, mask=None, sinks=None,
                                    stream=mx.cpu, backend="cpu")  # fmt: skip
    assert [c.name for c in got] == ["mx.fast"]


def test_shape_classes():
    assert [bucket(n) for n in (1, 2, 3, 4, 5, 64, 65, 1000)] == [1, 2, 4, 4, 8, 64, 128, 1024]
    q = mx.zeros((2, 8, 100, 64), mx.float16)
    kv = mx.zeros((2, 2, 3000, 64), mx.float16)
    c = shape_class(q, kv, kv, mx.zeros((100, 3000), mx.bool_), mx.zeros((8,), mx.float16))
    assert c == ShapeClass("float16", 64, 64, "bool", True, 4, 16, 128, 4096)
    assert ShapeClass.from_key(c.key()) == c
    trained = shape_class(q, kv, kv, "causal", training=True)
    assert trained.training and trained.key().endswith(" training")
    assert ShapeClass.from_key(trained.key()) == trained != trained._replace(training=False)
    assert shape_class(q, kv, kv, "upper") is None
    assert shape_class(mx.zeros(q.shape, mx.float64, stream=mx.cpu), kv, kv) is None
    with pytest.raises(ValueError, match="malformed"):
        ShapeClass.from_key("float16 D=64")


@pytest.mark.parametrize(
    "text, message",
    [("b=1,hq=4,hkv=3,lq=1,lk=8,d=32,dtype=float16", "multiple of H_kv"),
     ("b=1,hq=4,hkv=4,lq=1,lk=8,d=32,dtype=float64", "dtype must be one of"),
     ("b=1,hq=4,hkv=4,lq=1,lk=8,d=32,dtype=float16,mask=upper", "mask must be one of"),
     ("b=1,hq=4,hkv=4,lq=0,lk=8,d=32,dtype=float16", "positive integer"),
     ("b=1,hq=4,lq=1,lk=8,d=32,dtype=float16", "missing H_kv"),
     ("b=1,heads=4", "is not one of")],
)  # fmt: skip
def test_call_parse_errors_name_the_field(text, message):
    with pytest.raises(ValueError, match=message):
        tuning.Call.parse(text)


def test_call_masks_are_what_models_pass():
    call = tuning.Call.parse("b=2,hq=4,hkv=2,lq=4,lk=8,d=32,dtype=float16,mask=bool-padding")
    *_, mask = call.arrays()
    m = np.array(mask)
    assert m.shape == (2, 1, 4, 8) and m.dtype == np.bool_
    causal = np.arange(8)[None, :] <= np.arange(4)[:, None] + 4
    assert (m[0, 0] == causal).all()
    assert (m[1, 0] == (causal & (np.arange(8) >= 2))).all()  # entry 1: 2 keys of padding
    window = tuning.Call.parse("b=1,hq=4,hkv=2,lq=4,lk=8,d=32,dtype=float16,mask=bool-window=3")
    w = np.array(window.arrays()[3])[0, 0]
    assert (w.sum(axis=1) == 3).all()


CONFIG = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "num_key_value_heads": 2, "torch_dtype": "float16"}  # fmt: skip


def test_calls_from_a_config():
    from mlx_fused_attn import model_calls as mc

    shape = mc.model_shape(CONFIG)
    assert shape == mc.ModelShape(4, 2, 16, "float16", 0)
    calls = mc.model_calls(shape, max_kv=512, prefill_step=128, batch_sizes=(2,))
    labels = {(c.label, c.B, c.L_q, c.L_k, c.mask) for c in calls}
    assert ("prompt", 1, 128, 128, "causal") in labels
    assert ("prefill chunk", 1, 128, 512, "causal") in labels
    assert ("decode", 1, 1, 512, "none") in labels
    assert ("batched decode", 2, 1, 512, "bool-padding") in labels
    assert len({c.shape_class() for c in calls}) == len(calls)
    trained = mc.model_calls(shape, max_kv=512, prefill_step=128, batch_sizes=(2,),
                             train_lengths=(256,), train_batch=3)[len(calls):]  # fmt: skip
    assert [(c.label, c.B, c.L_q, c.L_k, c.mask, c.training) for c in trained] == [
        ("training step", 3, 256, 256, "causal", True)]  # fmt: skip
    windowed = mc.model_shape({"text_config": {**CONFIG, "sliding_window": 64}})
    calls = mc.model_calls(windowed, max_kv=512, prefill_step=128, batch_sizes=(2,))
    assert max(c.L_k for c in calls if c.label == "decode") == 64
    assert {c.mask for c in calls if c.L_q == 128} == {"bool-window=64"}
    with pytest.raises(ValueError, match="num_attention_heads"):
        mc.model_shape({"hidden_size": 64})


def run_cli(*args, env_file):
    env = {**os.environ, tuned_table.PATH_VARIABLE: str(env_file)}
    return subprocess.run([sys.executable, "-m", "mlx_fused_attn.tune", *args],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip


def test_the_cli_tunes_a_tiny_config(tmp_path, table_file):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    out = tmp_path / "out.json"
    done = run_cli(str(config), "--device", "cpu", "--max-kv", "256", "--prefill-step", "32",
                   "--warmup", "0", "--repeats", "1", "--json", str(out),
                   "--shapes", "b=1,hq=4,hkv=4,lq=8,lk=8,d=32,dtype=float32",
                   env_file=table_file)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "4/2 heads, head dim 16, float16" in done.stdout
    assert "shape class" in done.stdout and f"saved to {table_file}" in done.stdout
    result = json.loads(out.read_text())
    assert {c["class"] for c in result["classes"]} == set(
        json.loads(table_file.read_text())["tables"][0]["classes"])
    assert any("lk=8" in c["calls"][0].replace("Lk", "lk") for c in result["classes"])
    shown = run_cli("--show", "--device", "cpu", env_file=table_file)
    assert shown.returncode == 0 and "Lq<=32 Lk<=32" in shown.stdout, shown.stdout


@pytest.mark.parametrize(
    "args, message",
    [((), "give a model's config"), (("--shapes", "b=1"), "missing"),
     (("no-such-config.json",), "no-such-config.json")],
)  # fmt: skip
def test_the_cli_names_bad_arguments(tmp_path, args, message):
    done = run_cli(*args, "--device", "cpu", env_file=tmp_path / "t.json")
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_the_key_counts_the_device_cores():
    assert tuned_table.device_key(CPU)["cores"] == os.cpu_count()
    ioreg = '+-o AGXAcceleratorG15X  <class AGXAcceleratorG15X>\n  |   "gpu-core-count" = 40\n'
    assert tuned_table.apple_gpu_cores(ioreg) == 40
    assert tuned_table.apple_gpu_cores("no such line") is None
    if fa.build_info()["gpu_backend"] != "cuda":
        assert fa._ext.cuda_multiprocessors() == 0


@pytest.mark.parametrize(
    "code, splits, backend, expected",
    [("short_kernel", 1, "cuda", ["fused", "fused[short=off]"]),
     ("keys_split", 8, "cuda", ["fused", "fused[splits<=1]", "fused[splits<=4]"]),
     ("keys_split", 2, "cuda", ["fused", "fused[splits<=1]"]),
     ("general_kernel", 1, "cuda", ["fused"]),
     ("general_kernel", 1, "metal",
      ["fused"] + [f"fused[metal={v}]" for v in candidates.METAL_VARIANTS]),
     ("cpu_kernel", 1, "cpu", ["fused"])],
)  # fmt: skip
def test_the_plans_worth_timing(code, splits, backend, expected):
    base = fa.PlanSummary(code, "", "attention", splits, False, {})
    hints = candidates.hints_to_try(base, backend)
    assert [candidates.Candidate("fused", h).name for h in hints] == expected
