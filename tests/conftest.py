"""Shared helpers: a float64 reference with mx.fast's exact semantics, the
FlashAttention tolerance rule, the devices to test on, the test tiers, and
a host C++ program built and run (the compile tier's property checks).

Tiers (markers registered in pyproject.toml, given here by file so that a
new test lands in one without decoration):
- ``ops``: the op on every device MLX has, the files directly in tests/
  that compile nothing (about a minute on 2 cores: the quick tier);
- ``emu``: the Metal kernels in the CPU emulator (tests/metal_emu/), which
  compiles each kernel with the host compiler;
- ``compile``: C++, nvcc and NVRTC builds of sources that this machine
  cannot run (files named ``*_compile.py``), and the other files that run a
  compiler or a build (COMPILE_TIER);
- ``gpu``: also on every test that runs on a GPU (a ``device`` parameter of
  mx.gpu, or a file that needs one), so ``-m "not gpu"`` leaves them out;
- ``distributed``: also on the tests that start processes with
  ``mlx.launch`` (about 40 s on 2 cores), so ``-m "ops and not
  distributed"`` is the quick tier without them.
"""

import os
import pathlib
import subprocess

# Every kernel fills its output with NaN before running, so an element it
# fails to write fails the comparison (read once, at the first call).
os.environ.setdefault("MLX_FUSED_ATTN_POISON", "1")
# MLX's CUDA backend multiplies float32 matrices in TF32 unless told not to;
# the references and the fallback path are meant to be float32.
os.environ.setdefault("MLX_ENABLE_TF32", "0")
# Routing reads a tuned table where one exists: the tests read none but
# their own (a file in a fresh temporary directory, absent until written).
os.environ.setdefault(
    "MLX_FUSED_ATTN_TUNED_FILE",
    os.path.join(__import__("tempfile").mkdtemp(prefix="mlx_fused_attn_tests_"), "tuned.json"),
)

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


def _test_devices():
    """The devices MLX has, less those MLX_FUSED_ATTN_TEST_DEVICES leaves out
    (comma-separated cpu, gpu; default both). `cpu` keeps the tests off a GPU
    MLX reports but the kernels cannot use: a hosted macOS runner is a VM
    whose Metal device has no simdgroup matrices. Without the GPU, the CPU is
    made the default device too, for the calls that name no stream."""
    names = os.environ.get("MLX_FUSED_ATTN_TEST_DEVICES", "cpu,gpu").split(",")
    unknown = set(names) - {"cpu", "gpu"}
    if unknown:
        raise ValueError(f"MLX_FUSED_ATTN_TEST_DEVICES: unknown device(s) {sorted(unknown)}")
    known = ((mx.cpu, "cpu"), (mx.gpu, "gpu"))
    devices = [d for d, name in known if name in names and mx.is_available(d)]
    if mx.gpu not in devices:
        mx.set_default_device(mx.cpu)
    return devices


DEVICES = _test_devices()
DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32}
# Error floors per dtype, for outputs of magnitude ~1: a few units in the last
# place of the dtype (the fused kernel rounds once, on the store).
FLOOR = {mx.float16: 2e-3, mx.bfloat16: 1.6e-2, mx.float32: 2e-5}
SWEEP = int(os.environ.get("MLX_FUSED_ATTN_SWEEP", "40"))


TESTS = pathlib.Path(__file__).parent
# Files directly in tests/ that run a compiler or a build beyond the
# *_compile.py checks: the CPU kernels' ISA builds (g++), the Metal
# conformance pass (clang's AST), the metallib build (cmake, a fake xcrun).
COMPILE_TIER = {
    "test_cpu_na_isa.py",
    "test_metal_conformance.py",
    "test_metal_conformance_mlx.py",
    "test_build_metallib.py",
    "test_mlx_includes.py",
}
DISTRIBUTED = {"test_ring_attention.py"}
NEEDS_GPU = {
    "test_gpu_jit.py",
    "test_cuda_backend.py",
    "test_split_keys.py",
    "test_split_merge.py",
    "test_cuda_memory.py",
}


def tier(path):
    """The tier marker of a test file (see the module docstring), or None
    for files in other folders."""
    rel = pathlib.Path(path).relative_to(TESTS)
    if rel.parts[0] == "metal_emu":
        return "emu"
    if len(rel.parts) > 1:
        return None
    if rel.name.endswith("_compile.py") or rel.name in COMPILE_TIER:
        return "compile"
    return "ops"


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_host_program(compiler, program, tmp_path, suffix=".cpp"):
    """Builds the C++ `program` with `compiler` (C++17, the repository on the
    include path) and runs it: the run's CompletedProcess, text output."""
    src = tmp_path / f"program{suffix}"
    src.write_text(program)
    exe = tmp_path / "program"
    subprocess.run([compiler, "-std=c++17", f"-I{REPO}", str(src), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True)


def pytest_collection_modifyitems(items):
    for item in items:
        name = tier(item.path)
        if name:
            item.add_marker(name)
        if item.path.name in DISTRIBUTED:
            item.add_marker("distributed")
        params = getattr(item, "callspec", None)
        # Devices are parametrized as mx.gpu, or as "gpu" for child processes.
        device = params.params.get("device") if params else None
        if device is not None and (device == mx.gpu or device == "gpu") or (
            item.path.name in NEEDS_GPU
        ):
            item.add_marker("gpu")


def device_params():
    return pytest.mark.parametrize(
        "device", DEVICES, ids=[("cpu" if d == mx.cpu else "gpu") for d in DEVICES]
    )


def to_np(x):
    return np.array(x.astype(mx.float32)).astype(np.float64)


def reference(q, k, v, scale, mask=None, sinks=None):
    """softmax(scale q k^T + mask) v in float64, as mx.fast defines it: a
    boolean or causal mask replaces scores with finfo(dtype).min (so a row
    masked everywhere averages v), sinks are unscaled extra logits."""
    dt = q.dtype
    qn, kn, vn = to_np(q), to_np(k), to_np(v)
    B, Hq, Lq, _ = qn.shape
    Hk, Lk = kn.shape[1], kn.shape[2]
    g = Hq // Hk
    kn = np.repeat(kn, g, axis=1)
    vn = np.repeat(vn, g, axis=1)
    s = scale * np.einsum("bhqd,bhkd->bhqk", qn, kn)
    lowest = float(np.finfo(np.float16).min) if dt == mx.float16 else float(
        np.finfo(np.float32).min
    )
    if isinstance(mask, str):
        allowed = np.arange(Lq)[:, None] + (Lk - Lq) >= np.arange(Lk)[None, :]
        s = np.where(allowed, s, lowest)
    elif mask is not None and mask.dtype == mx.bool_:
        s = np.where(np.broadcast_to(np.array(mask), s.shape), s, lowest)
    elif mask is not None:
        s = s + np.broadcast_to(to_np(mask), s.shape)
    if sinks is not None:
        sk = np.broadcast_to(to_np(sinks)[None, :, None, None], (B, Hq, Lq, 1))
        s = np.concatenate([sk, s], axis=-1)
    with np.errstate(invalid="ignore", over="ignore"):
        m = s.max(axis=-1, keepdims=True)
        p = np.exp(s - m)
        p = p / p.sum(axis=-1, keepdims=True)
    if sinks is not None:
        p = p[..., 1:]
    return np.einsum("bhqk,bhkd->bhqd", p, vn)


def assert_close(out, q, k, v, scale, mask=None, sinks=None, what=""):
    """The FlashAttention rule: the fused error is at most twice that of the
    same attention computed naively in the input dtype (mx.fast on the CPU,
    which runs unfused there), plus a per-dtype floor. NaN must match."""
    ref = reference(q, k, v, scale, mask, sinks)
    naive = mx.fast.scaled_dot_product_attention(
        q, k, v, scale=scale, mask=mask, sinks=sinks, stream=mx.cpu
    )
    got = to_np(out)
    assert got.shape == ref.shape, what
    nan_ref = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(got), nan_ref, err_msg=f"NaN pattern {what}")
    ok = ~nan_ref
    err = np.abs(got - ref)[ok].max(initial=0.0)
    naive_err = np.abs(to_np(naive) - ref)[ok].max(initial=0.0)
    bound = 2 * naive_err + FLOOR[q.dtype] * max(1.0, np.abs(ref[ok]).max(initial=0.0))
    assert err <= bound, f"{what}: max error {err:.3g} > bound {bound:.3g} (naive {naive_err:.3g})"


def rand(shape, dtype, seed, scale=1.0):
    key = mx.random.key(seed)
    return (scale * mx.random.normal(shape, key=key)).astype(dtype)


@pytest.fixture(autouse=True)
def _routes_answered_afresh():
    """route() keeps its answers by call signature; a test that swaps
    routing's internals (the backend, the device, the measurements) starts
    from none kept."""
    from mlx_fused_attn import routing

    routing._routes.clear()
    yield
