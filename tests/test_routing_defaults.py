"""The shipped routing defaults (routing_defaults.json) and the plan summary
routing switches on: without a tuned table, route() gives each measured
call the faster side of its measurement, on every backend, checked without
a GPU."""

import json

import mlx.core as mx
import pytest

import mlx_fused_attn as fa
from mlx_fused_attn import plans, routing, routing_defaults, tuned_table

MEASUREMENTS = routing_defaults.measurements()


def test_every_entry_names_its_device_date_commit_and_source():
    doc = json.loads(routing_defaults.PATH.read_text())
    assert doc["format"] == 1 and len(doc["measurements"]) == len(MEASUREMENTS)
    for m in MEASUREMENTS:
        assert m.backend in routing_defaults.BACKENDS
        assert m.device and m.source and m.timing and m.case
        assert len(m.date) == 10 and m.date.startswith("2026-")
        assert m.commit is None or len(m.commit) == 7
        assert m.ours_us > 0 and m.mx_fast_us > 0
        assert m.mask in ("none", "causal", "bool", "additive")


def test_one_device_measures_one_winner_per_shape_class():
    winners = {}
    for m in MEASUREMENTS:
        if not m.superseded:
            winners.setdefault((m.device, m.shape_class()), set()).add(m.ours_faster)
    assert all(len(w) == 1 for w in winners.values()), winners


def arrays(m):
    """Unevaluated zeros of the measured call's shapes (nothing is
    allocated: routing reads shapes only)."""
    dt = getattr(mx, m.dtype)
    q = mx.zeros((m.B, m.H_q, m.L_q, m.D), dt)
    k = mx.zeros((m.B, m.H_kv, m.L_k, m.D), dt)
    v = mx.zeros((m.B, m.H_kv, m.L_k, m.D_v), dt)
    mask = {"none": None, "causal": "causal", "bool": mx.zeros((1, 1, m.L_q, m.L_k), mx.bool_),
            "additive": mx.zeros((1, 1, m.L_q, m.L_k), dt)}[m.mask]  # fmt: skip
    return q, k, v, mask


def on_device(monkeypatch, backend, name):
    """Route as on a `backend` device called `name`, with no tuned table and
    every call covered by a fused plan."""
    monkeypatch.setenv(tuned_table.PATH_VARIABLE, "/nonexistent/tuned.json")
    tuned_table.forget()
    gpu = backend != "cpu"
    device = mx.Device(mx.gpu if gpu else mx.cpu)
    key = {"backend": backend, "device": name}
    monkeypatch.setattr(tuned_table, "device_key", lambda d: key)
    monkeypatch.setattr(routing, "_device", lambda stream: device)
    monkeypatch.setattr(routing, "_gpu_backend", lambda: backend)
    covered = fa.PlanSummary(plans.GENERAL_KERNEL, "", "attention", 1, False, {})
    monkeypatch.setattr(fa, "plan_summary", lambda *a, **kw: covered)


@pytest.mark.parametrize(
    "backend, name",
    [("cpu", "Intel(R) Xeon(R) Processor"), ("cuda", "NVIDIA H200"),
     ("cuda", "NVIDIA H100 80GB HBM3"), ("cuda", "NVIDIA A100-SXM4-80GB")],
)  # fmt: skip
def test_routing_without_a_table_is_the_shipped_defaults(monkeypatch, backend, name):
    on_device(monkeypatch, backend, name)
    defaults = routing_defaults.defaults_for(backend, name)
    assert defaults
    for c, m in defaults.items():
        # The running device's own measurement serves the class where it
        # has one, else the newest.
        same = [x for x in MEASUREMENTS
                if x.backend == backend and not x.superseded and x.shape_class() == c]  # fmt: skip
        own = [x for x in same if x.device.lower() in name.lower()]
        assert m in own if own else m.date == max(x.date for x in same)
        q, k, v, mask = arrays(m)
        route = fa.route(q, k, v, scale=1.0, mask=mask)
        expected = routing.FUSED if m.ours_faster else routing.PASSTHROUGH
        assert (route.choice, route.source) == (expected, routing.DEFAULTS), (m.case, route)
        assert m.date in route.reason and m.device in route.reason


def test_the_h100_measurements_overrule_the_h200_ones_on_an_h100(monkeypatch):
    """Issue 42's H100 rows: B=4 L=8192 D=128 bf16 goes to ours on an H100
    (6217 against 6331 us) and to mx.fast on an H200 (6569 against 6243)."""
    m = next(x for x in MEASUREMENTS if x.device.startswith("NVIDIA H100") and x.L_q == 8192)
    q, k, v, mask = arrays(m)
    on_device(monkeypatch, "cuda", "NVIDIA H100 80GB HBM3")
    assert fa.route(q, k, v, scale=1.0, mask=mask).choice == routing.FUSED
    on_device(monkeypatch, "cuda", "NVIDIA H200")
    assert fa.route(q, k, v, scale=1.0, mask=mask).choice == routing.PASSTHROUGH


def test_a_superseded_entry_is_kept_but_not_used():
    (old,) = [m for m in MEASUREMENTS if m.superseded]
    assert old.ours_us == 8.3 and old.mx_fast_us == 4.7
    assert old not in routing_defaults.defaults_for("cuda", "NVIDIA H200").values()


def test_a_class_without_defaults_takes_the_rule(monkeypatch):
    on_device(monkeypatch, "cuda", "NVIDIA H200")
    q = mx.zeros((1, 32, 4096, 80), mx.float16)
    route = fa.route(q, q, q, scale=1.0)
    assert (route.choice, route.source) == (routing.PASSTHROUGH, routing.RULE)
    assert route.reason.startswith("CUDA:")


def test_routing_never_reads_reason_text():
    """The decision switches on the plan's code (plan_summary.h), not on the
    wording of a reason."""
    text = open(routing.__file__).read()
    assert "startswith(" not in text.replace('architecture.startswith("applegpu_")', "")


def test_plan_summary_on_the_cpu():
    q = mx.zeros((1, 4, 16, 32), mx.float16)
    plan = fa.plan_summary(q, q, q, scale=1.0, stream=mx.cpu)
    assert plan == fa.PlanSummary(plans.CPU_KERNEL, "the CPU kernel", "attention", 1, False, {})
    assert plan.fused
    q64 = q.astype(mx.float64, stream=mx.cpu)
    plan = fa.plan_summary(q64, q64, q64, scale=1.0, stream=mx.cpu)
    assert (plan.code, plan.family, plan.fused) == (plans.NO_KERNEL, "", False)
    assert "float64" in plan.message
    assert plan.message == fa.can_use_fused(q64, q64, q64, scale=1.0, stream=mx.cpu)[1]


@pytest.mark.parametrize(
    "hint, message",
    [(plans.PlanHint(max_key_splits=-1), "max_key_splits must be 0"),
     (plans.PlanHint(metal_variant="bk64"), 'metal_variant.*unknown word "bk64"')],
)  # fmt: skip
def test_a_bad_plan_hint_names_its_field(hint, message):
    q = mx.zeros((1, 4, 16, 32), mx.float16)
    with pytest.raises(ValueError, match=message):
        fa.plan_summary(q, q, q, scale=1.0, stream=mx.cpu, hint=hint)
    with pytest.raises(ValueError, match=message):
        fa._attention(q, q, q, scale=1.0, stream=mx.cpu, hint=hint)
