"""ring_attention over ``mlx.launch --backend ring`` processes on this
machine (tests/ring_worker.py runs in each): forward and gradients against
the one-process fused call and float64, on 2 and 4 processes; a process
that dies or stalls makes the others fail with a message, not hang. The
sharding helpers in one process."""

import json
import pathlib
import random
import socket
import subprocess
import sys
import time

import mlx.core as mx
import numpy as np
import pytest

import mlx_fused_attn as fa
from conftest import rand
from ring_worker import CASES

WORKER = pathlib.Path(__file__).parent / "ring_worker.py"
LAUNCH = pathlib.Path(sys.executable).parent / "mlx.launch"

pytestmark = pytest.mark.skipif(not LAUNCH.exists(), reason="mlx.launch is not installed")


def free_ports(n):
    """A first port of n consecutive free ones (the ring backend listens on
    one per rank), so that runs side by side do not collide."""
    for _ in range(100):
        first = random.randrange(20000, 60000 - n)
        try:
            for p in range(first, first + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return first
        except OSError:
            continue
    raise RuntimeError("no free ports")


def launch(n, *args, timeout):
    cmd = [str(LAUNCH), "-n", str(n), "--backend", "ring", "--starting-port", str(free_ports(n)),
           sys.executable, str(WORKER), *args]  # fmt: skip
    start = time.monotonic()
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return run.stdout + run.stderr, time.monotonic() - start


@pytest.mark.parametrize("n", [2, 4])
def test_ring_equals_one_process(n):
    out, _ = launch(n, "checks", timeout=240)
    passed = [line for line in out.splitlines() if " PASS " in line]
    assert len(passed) == n * len(CASES[n]), out[-4000:]


def test_a_dead_process_fails_the_others():
    out, took = launch(2, "die", "60", timeout=120)
    assert "[ring_attention] rank 0 of 2: a transfer failed" in out, out[-4000:]
    assert "likely died" in out and took < 60


def test_a_stalled_process_times_out_under_ring_deadline():
    out, took = launch(2, "stall", "5", timeout=120)
    assert "[ring_attention] rank 0 of 2: the step did not finish within 5.0 s" in out, out[-4000:]
    assert "exited with code 70" in out and took < 60


def test_ring_bench_writes_strict_json(tmp_path):
    bench = pathlib.Path(__file__).parents[1] / "benchmarks" / "ring_bench.py"
    run = subprocess.run(
        [sys.executable, str(bench), "--total", "256", "--procs", "1", "2", "--iters", "1",
         "--causal", "--backward", "--json", "r.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr

    def refuse(constant):
        raise ValueError(f"r.json holds {constant}, which is not JSON")

    rows = json.loads((tmp_path / "r.json").read_text(), parse_constant=refuse)["rows"]
    assert [r["procs"] for r in rows] == [1, 2, 2]
    assert all(r["fwd_ms"] > 0 and r["fwd_bwd_ms"] > 0 and r["peak_mib"] > 0 for r in rows)
    assert all(r["fb_peak_mib"] >= r["peak_mib"] for r in rows)
    assert all(0 <= r["overlap"] <= 1 for r in rows[1:])


@pytest.mark.parametrize("layout", ["contiguous", "zigzag"])
@pytest.mark.parametrize("total,size", [(37, 2), (101, 4), (8, 3)])
def test_shard_and_unshard(layout, total, size):
    x = mx.arange(total).reshape(1, 1, total, 1)
    parts = [fa.ring_shard(x, r, size, layout=layout) for r in range(size)]
    assert sum(p.shape[2] for p in parts) == total
    np.testing.assert_array_equal(np.array(fa.ring_unshard(parts, layout=layout)), np.array(x))
    if layout == "zigzag":
        # Rank r holds chunks r and 2n - 1 - r of 2n: the first rank holds
        # the sequence's first and last tokens.
        assert parts[0][0, 0, 0, 0].item() == 0 and parts[0][0, 0, -1, 0].item() == total - 1


def test_one_process_is_the_fused_call():
    q, k, v = (rand((1, 2, 50, 32), mx.float32, s) for s in (1, 2, 3))
    group = mx.distributed.init()
    assert group.size() == 1
    out = fa.ring_attention(q, k, v, causal=True, group=group, layout="zigzag")
    ref = fa.scaled_dot_product_attention(q, k, v, scale=32**-0.5, mask="causal")
    np.testing.assert_array_equal(np.array(out), np.array(ref))


def test_ring_attention_rejects_bad_arguments():
    q = mx.zeros((1, 2, 8, 16))
    with pytest.raises(ValueError, match="layout must be one of"):
        fa.ring_attention(q, q, q, layout="striped")
    with pytest.raises(ValueError, match="one length on each"):
        fa.ring_attention(q, mx.zeros((1, 2, 9, 16)), mx.zeros((1, 2, 9, 16)), causal=True)
    with pytest.raises(ValueError, match=r"\[B, H, L, D\]"):
        fa.ring_attention(mx.zeros((2, 8, 16)), q, q)
    with pytest.raises(TypeError, match="causal must be a bool"):
        fa.ring_attention(q, q, q, causal="yes")
