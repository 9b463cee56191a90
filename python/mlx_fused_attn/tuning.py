"""``tune``: time mx.fast and this package's fused plans for a set of calls
on one device and keep the winner of each shape class (``shape_class.py``)
in the tuned table (``tuned_table.py``), which ``route`` and
``patch_mx_fast`` then read: a lookup, no timing in a model's hot path.

Timing: each candidate runs ``warmup`` times untimed (building kernels,
filling caches), then up to ``repeats`` times, stopping early once the
timed runs pass ``budget_s``; the median counts. The candidates of a call
take turns, one timed run each a round (``medians_in_turn``). A call is
timed alone, and where its fastest candidate takes under ``ALONE_SECONDS``,
again in runs of ``chain`` calls, each call's queries the previous call's
output: dependent calls run one after another (independent ones of one
evaluation overlap in MLX's CUDA graphs), as a model's layers do, and a
short call's time is not the device's wake-up. A run is submitted first
(``mx.async_eval``: the host encodes the calls and commits them), and
``clock`` is read around the wait for its result: on a GPU, the device's
work with the host's encoding left out, which for calls of a few tens of
microseconds would otherwise rank near ties by host work (docs/routing.md,
"The clock"); MLX exposes no GPU time for a command buffer. A candidate
that lost by more than ``prune`` times at a smaller class of the same
series (the same class but for L_q and L_k, both no longer) is not timed
again: unfused attention only falls further behind as lengths grow, and on
the CPU one such call can take seconds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

import mlx.core as mx

from . import candidates as cand
from . import tuned_table
from .shape_class import ShapeClass, class_of_sizes

DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32}
# Masks a call may carry: its shape class's kind is the word before "-".
# The array masks are [1, 1, L_q, L_k] but "padding", [B, 1, L_q, L_k]:
# "bool"/"additive" random, "-causal" bottom-right causal (what mlx-lm passes
# as an array), "bool-window=N" causal within N keys (a sliding-window
# layer), "bool-padding" causal with each batch entry's left padding hidden
# (mlx-lm's batched generation).
MASKS = ("none", "causal", "bool", "additive", "bool-causal", "additive-causal",
         "bool-window=N", "bool-padding")  # fmt: skip


class Call(NamedTuple):
    """One attention call to tune, by its sizes."""

    B: int
    H_q: int
    H_kv: int
    L_q: int
    L_k: int
    D: int
    D_v: int
    dtype: str  # a key of DTYPES
    mask: str = "none"  # one of MASKS
    label: str = ""  # what the call is in a model ("decode", "prefill chunk")
    training: bool = False  # a training step: the forward and its gradient

    def mask_kind(self) -> str:
        return self.mask.split("-")[0]

    def shape_class(self) -> ShapeClass:
        return class_of_sizes(
            B=self.B, H_q=self.H_q, H_kv=self.H_kv, L_q=self.L_q, L_k=self.L_k,
            D=self.D, D_v=self.D_v, dtype=self.dtype, mask=self.mask_kind(),
            training=self.training,
        )  # fmt: skip

    def describe(self) -> str:
        d = f"{self.D}" if self.D == self.D_v else f"{self.D}/{self.D_v}"
        label = f"{self.label}: " if self.label else ""
        return (
            f"{label}B={self.B} H={self.H_q}/{self.H_kv} Lq={self.L_q} Lk={self.L_k} "
            f"D={d} {self.dtype} {self.mask}" + (" training" if self.training else "")
        )

    @classmethod
    def parse(cls, text: str) -> Call:
        """``b=1,hq=32,hkv=8,lq=1,lk=4096,d=128[,dv=128],dtype=bfloat16[,mask=causal]
        [,train=1]`` (``train=1``: a training step)."""
        fields = {"b": "B", "hq": "H_q", "hkv": "H_kv", "lq": "L_q", "lk": "L_k", "d": "D",
                  "dv": "D_v", "dtype": "dtype", "mask": "mask", "train": "training"}  # fmt: skip
        given = {}
        for part in text.split(","):
            name, _, value = part.strip().partition("=")
            if name not in fields or not value:
                raise ValueError(
                    f"call {text!r}: {part!r} is not one of {', '.join(f + '=' for f in fields)}"
                )
            if name == "train":
                if value not in ("0", "1"):
                    raise ValueError(f"call {text!r}: train must be 0 or 1; got {value!r}")
                given["training"] = value == "1"
                continue
            text_field = name in ("dtype", "mask")
            given[fields[name]] = value if text_field else _positive(text, name, value)
        missing = {"B", "H_q", "H_kv", "L_q", "L_k", "D", "dtype"} - given.keys()
        if missing:
            raise ValueError(f"call {text!r}: missing {', '.join(sorted(missing))}")
        given.setdefault("D_v", given["D"])
        call = cls(**given)
        call.check()
        return call

    def check(self) -> None:
        """ValueError naming what is wrong."""
        if self.dtype not in DTYPES:
            raise ValueError(f"call {self}: dtype must be one of {', '.join(DTYPES)}")
        window = self.mask.startswith("bool-window=") and self.mask[12:].isdigit()
        if self.mask not in MASKS and not window:
            raise ValueError(
                f"call {self.describe()}: mask must be one of {', '.join(MASKS)} (N a number)"
            )
        if self.H_q % self.H_kv:
            raise ValueError(f"call {self.describe()}: H_q must be a multiple of H_kv")

    def arrays(self, seed: int = 0):
        """q, k, v and the mask argument of the call, on the default device."""
        dt = DTYPES[self.dtype]
        key = mx.random.key(seed)
        kq, kk, kv, km = mx.random.split(key, 4)
        q = mx.random.normal((self.B, self.H_q, self.L_q, self.D), key=kq).astype(dt)
        k = mx.random.normal((self.B, self.H_kv, self.L_k, self.D), key=kk).astype(dt)
        v = mx.random.normal((self.B, self.H_kv, self.L_k, self.D_v), key=kv).astype(dt)
        return q, k, v, self._mask(dt, km)

    def _mask(self, dt, key):
        if self.mask in ("none", "causal"):
            return None if self.mask == "none" else "causal"
        shape = (1, 1, self.L_q, self.L_k)
        if self.mask == "bool":
            return mx.random.bernoulli(0.75, shape, key=key)
        if self.mask == "additive":
            return mx.random.normal(shape, key=key).astype(dt)
        rows = mx.arange(self.L_q)[:, None] + (self.L_k - self.L_q)
        cols = mx.arange(self.L_k)[None, :]
        seen = cols <= rows
        if self.mask.startswith("bool-window="):
            seen = seen & (cols > rows - int(self.mask[12:]))
        if self.mask == "bool-padding":
            # Entry b's first b / (2B) of the keys are padding.
            pad = (mx.arange(self.B) * self.L_k // (2 * self.B))[:, None, None, None]
            return seen[None, None] & (cols[None, None] >= pad)
        if self.mask == "additive-causal":
            # -inf: hidden blocks the kernel skips. fp16's finfo.min is a
            # value it adds (a dense mask's time), which made the H100's
            # additive class a tie that mx.fast took (2026-12-06).
            return mx.where(seen, 0.0, -mx.inf).astype(dt)[None, None]
        return seen[None, None]


def _positive(text, name, value) -> int:
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"call {text!r}: {name} must be a positive integer; got {value!r}")
    return int(value)


def _sample(run: Callable[[], mx.array], clock: Callable[[], float]) -> float:
    """One timed evaluation of ``run()``: the wait for its result after its
    submission (``mx.async_eval``). MLX commits a GPU stream's work when a
    submission ends, so the wait holds the device's time and not the host's
    encoding. Where the wait is the shorter, the device started during the
    submission (MLX also commits every 20 operations on CUDA) and the wait
    saw only the tail of its work (7.7 us for a training step of plain ops,
    H100 2026-12-06): the sample is then the submission and the wait
    together."""
    out = run()
    start = clock()
    mx.async_eval(out)
    submitted = clock()
    mx.eval(out)
    done = clock()
    wait = done - submitted
    return wait if wait >= submitted - start else done - start


def medians_in_turn(runs: dict, *, warmup: int, repeats: int, budget_s: float,
                    clock: Callable[[], float]) -> dict:  # fmt: skip
    """The median of up to ``repeats`` timed evaluations (``_sample``) of
    each of ``runs`` (name -> run), after ``warmup`` untimed ones each. The
    runs take turns, one timed evaluation each a round, and a run's rounds
    end once its samples pass ``budget_s``: timed one after another, the
    first of equal plans ran slowest (decode at 8192 keys, 40.6 us against
    38.6; H100 2026-12-06), and the order picked winners."""
    for run in runs.values():
        for _ in range(warmup):
            mx.eval(run())
    samples = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            if sum(samples[name]) < budget_s:
                samples[name].append(_sample(run, clock))
    return {name: statistics.median(x) for name, x in samples.items()}


def chained(step: Callable[[mx.array], mx.array], q: mx.array, chain: int):
    """A run for ``medians_in_turn``: ``chain`` calls of ``step``, each on
    the previous one's output (its queries' shape where the head dims of q
    and v agree; one call otherwise), and the number of calls it makes."""
    calls = chain if step(q).shape == q.shape else 1

    def run():
        x = q
        for _ in range(calls):
            x = step(x)
        return x

    return run, calls


# A call at least this long is timed alone, one evaluation a run, as the
# benchmarks time it: the wake-up a chain saves is then a few percent, added
# to every candidate alike, and a chain let mx.fast's decode at B=8 and 32K
# keys pass for 335 us where alone it took 395-424 against our 345 (H100,
# 2026-12-06).
ALONE_SECONDS = 200e-6


def call_seconds(steps: dict, q: mx.array, chain: int, **timing) -> dict:
    """Seconds a call takes for each of ``steps`` (name -> a function of the
    queries), timed in turn (``medians_in_turn``, whose arguments
    ``timing`` holds): alone, then, where the fastest took under
    ``ALONE_SECONDS``, all again in runs of ``chain`` dependent calls
    (``chained``), over their number."""
    alone = medians_in_turn({name: (lambda s=s: s(q)) for name, s in steps.items()}, **timing)
    if chain == 1 or min(alone.values()) >= ALONE_SECONDS:
        return alone
    runs = {name: chained(s, q, chain) for name, s in steps.items()}
    if any(calls == 1 for _, calls in runs.values()):
        return alone
    timed = medians_in_turn({name: run for name, (run, _) in runs.items()}, **timing)
    return {name: timed[name] / runs[name][1] for name in runs}


class ClassResult(NamedTuple):
    """What ``tune`` measured for one shape class."""

    shape_class: ShapeClass
    winner: str  # a candidate's name
    us: dict  # candidate name -> median us a call (summed over the class's calls)
    per_call: dict  # candidate name -> its median us on each of the class's calls
    skipped: dict  # candidate name -> why it was not timed
    calls: list  # the calls, described

    def speedup(self) -> float | None:
        """mx.fast's time over the winner's (None where mx.fast was not timed)."""
        fast = self.us.get(cand.MX_FAST)
        return fast / self.us[self.winner] if fast else None


def _step(candidate: cand.Candidate, k, v, mask, scale, stream):
    """The candidate's call as a function of its queries."""
    if candidate.kind == cand.MX_FAST:
        return lambda q: mx.fast.scaled_dot_product_attention(
            q, k, v, scale=scale, mask=mask, stream=stream
        )
    from . import _attention

    return lambda q: _attention(q, k, v, scale=scale, mask=mask, stream=stream,
                                hint=candidate.hint)  # fmt: skip


def _training_run(candidate: cand.Candidate, q, k, v, mask, scale, stream):
    """A run for ``medians_in_turn``: one training step of the candidate,
    the loss sum(o^2) in float32 and its gradients with respect to q, k and
    v (a step takes hundreds of microseconds: one a run)."""

    def loss(q, k, v):
        o = _step(candidate, k, v, mask, scale, stream)(q)
        return mx.sum(mx.square(o.astype(mx.float32)))

    grads = mx.grad(loss, argnums=(0, 1, 2))
    return lambda: list(grads(q, k, v))


# How much faster than the planner's own plan a hinted plan must be to win:
# the planner's choices come from kernel-time sweeps, a tuner's from a few
# wall-clock runs. Hinted winners by under 10% were slower in kernel time on
# 4 of 5 rows timed (H100 and H200, 2026-12-06; benchmarks/RESULTS.md).
HINT_MARGIN = 1.10


def _worst_ratios(per_call: dict) -> dict:
    """Each candidate's largest ratio to the fastest candidate over the
    class's calls."""
    best = [min(times) for times in zip(*per_call.values())]
    return {name: max(t / b for t, b in zip(times, best)) for name, times in per_call.items()}


def _winner(per_call: dict) -> str:
    """The candidate whose worst call is least behind that call's fastest
    (ties: the least summed time), but the planner's own plan where a hinted
    plan's worst ratio beats its own by less than ``HINT_MARGIN``. A class
    stands for every call in it, and the one routing decision must hold on
    each: summed times let one long call hide a short call lost 3x (an
    additive-mask class, dense and causal masks, H100 2026-12-06)."""
    worst = _worst_ratios(per_call)
    best = min(per_call, key=lambda name: (worst[name], sum(per_call[name])))
    own = worst.get(cand.FUSED)
    if best.startswith(cand.FUSED + "[") and own is not None and own <= HINT_MARGIN * worst[best]:
        return cand.FUSED
    return best


def _series(c: ShapeClass) -> ShapeClass:
    return c._replace(queries=0, keys=0)


def tune(
    calls: Iterable[Call],
    *,
    device: mx.Device | None = None,
    warmup: int = 1,
    repeats: int = 10,
    budget_s: float = 1.0,
    chain: int | None = None,
    prune: float = 4.0,
    clock: Callable[[], float] = time.perf_counter,
    save: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[ClassResult]:
    """Time the candidates of ``calls`` on ``device`` (default: MLX's
    default device) and return the winner of each shape class, smaller
    classes first; with ``save``, merged into the tuned table of the device.

    Args:
        calls: the calls to time; calls of one shape class are timed
            together, and the class goes to the candidate least behind on
            its worst call (``_winner``).
        warmup, repeats, budget_s: untimed runs, the most timed runs, and
            the timed seconds after which a candidate's runs stop.
        chain: dependent calls a timed run of a call shorter than
            ``ALONE_SECONDS`` makes (default: 8 on a GPU, where the wake-up
            after one call's kernels costs about a decode's kernels; 1 on
            the CPU, whose calls take milliseconds).
        prune: a candidate this many times slower than the winner of a
            smaller class of the same series is skipped (0: never).
        clock: seconds, read around the wait for each timed run (injectable for
            tests).
        progress: called with (candidates timed, candidates in all, what
            is being timed) before each timing.
    """
    device = device or mx.default_device()
    backend = tuned_table.device_key(device)["backend"]
    if chain is None:
        chain = 1 if device.type == mx.DeviceType.cpu else 8
    by_class: dict[ShapeClass, list[Call]] = {}
    for call in calls:
        call.check()
        by_class.setdefault(call.shape_class(), []).append(call)
    order = sorted(by_class, key=lambda c: (c.queries * c.keys, c))
    with mx.stream(device):
        stream = mx.default_stream(device)
        # Unevaluated until timed, and dropped once their class is: the
        # calls' arrays never all exist at once.
        prepared = {c: [(call, *call.arrays(i)) for i, call in enumerate(by_class[c])]
                    for c in order}  # fmt: skip
        plans = {}
        for c in order:
            names = {}
            for call, q, k, v, mask in prepared[c]:
                for x in cand.candidates_for(q, k, v, scale=call.D**-0.5, mask=mask, sinks=None,
                                             stream=stream, backend=backend):  # fmt: skip
                    # A plan hint shapes the forward alone: a training step
                    # has the planner's plan and mx.fast.
                    if not c.training or x.name in (cand.FUSED, cand.MX_FAST):
                        names.setdefault(x.name, x)
            plans[c] = list(names.values())
        total = sum(len(p) * len(prepared[c]) for c, p in plans.items())
        done = 0
        lost: dict[ShapeClass, dict[str, tuple[ShapeClass, float]]] = {}
        timing = dict(warmup=warmup, repeats=repeats, budget_s=budget_s, clock=clock)
        results = []
        for c in order:
            timed = prepared.pop(c)
            mx.eval([x for _, *arrays in timed for x in arrays if isinstance(x, mx.array)])
            per_call, skipped, timed_plans = {}, {}, []
            for x in plans[c]:
                beaten = [(small, r) for small, r in lost.get(_series(c), {}).get(x.name, [])
                          if small.queries <= c.queries and small.keys <= c.keys]  # fmt: skip
                if prune and beaten:
                    small, ratio = beaten[0]
                    skipped[x.name] = f"{ratio:.1f}x slower than the winner at {small.key()}"
                    done += len(timed)
                else:
                    timed_plans.append(x)
                    per_call[x.name] = []
            for call, q, k, v, mask in timed:
                if progress:
                    progress(done, total, call.describe())
                scale = call.D**-0.5
                if call.training:
                    seconds = medians_in_turn(
                        {x.name: _training_run(x, q, k, v, mask, scale, stream)
                         for x in timed_plans}, **timing)  # fmt: skip
                else:
                    seconds = call_seconds(
                        {x.name: _step(x, k, v, mask, scale, stream) for x in timed_plans},
                        q, chain, **timing)  # fmt: skip
                for name, t in seconds.items():
                    per_call[name].append(1e6 * t)
                done += len(timed_plans)
            winner = _winner(per_call)
            us = {name: sum(times) for name, times in per_call.items()}
            for name, t in us.items():
                if prune and t > prune * us[winner]:
                    lost.setdefault(_series(c), {}).setdefault(name, []).append((c, t / us[winner]))
            results.append(ClassResult(c, winner, us, per_call, skipped,
                                       [x.describe() for x in by_class[c]]))  # fmt: skip
        if progress:
            progress(total, total, "done")
    if save:
        tuned_table.write(
            device,
            {r.shape_class: tuned_table.TunedClass(r.winner, r.us, r.skipped, r.calls, r.per_call)
             for r in results},
        )  # fmt: skip
    return results
