"""Self-tests of the Metal emulator: the shim's types and simdgroup
operations against numpy, a tiled matmul under fair and adversarial
schedules, and the bugs the emulator exists to catch."""

import re

import numpy as np
import pytest

from . import emu, metal_source

SEEDS = [1, 2, 3, 4, 5, 6, 7, 8]
TILE_OPS = "tests/metal_emu/kernels/tile_ops.metal"


def kernels(name):
    return emu.load(f"tests/metal_emu/kernels/{name}.metal")


def nan_f32(n):
    return np.full(n, np.nan, dtype=np.float32)


# ---------------------------------------------------------------------------
# Simdgroup collectives


def shuffles_reference(x, param, lanes):
    ref = np.empty((len(x), 8), np.float32)
    for base in range(0, len(x), 32):
        v = x[base : base + 32]
        n = min(lanes, len(v))
        for i in range(n):
            ref[base + i] = [
                v[(i * 7 + param) % 32] if (i * 7 + param) % 32 < n else np.nan,
                v[i ^ param] if (i ^ param) < n else np.nan,
                v[i + param] if i + param < n else v[i],
                v[i - param] if i >= param else v[i],
                v[param % 32] if param % 32 < n else np.nan,
                v[:n].sum(),
                v[:n].max(),
                v[:n].min(),
            ]
    return ref


@pytest.mark.parametrize("param", [0, 1, 3, 16, 31])
@pytest.mark.parametrize("schedule", ["fair", 11])
def test_shuffles_and_reductions(param, schedule):
    rng = np.random.default_rng(param)
    x = rng.integers(-1000, 1000, 96).astype(np.float32)
    out = kernels("simd_ops").launch(
        "shuffles",
        {0: x, 1: nan_f32(96 * 8), 2: np.array([param], np.uint32)},
        grid=(3, 1, 1),
        threadgroup=(32, 1, 1),
        schedule=schedule,
    )
    np.testing.assert_array_equal(out[1].reshape(96, 8), shuffles_reference(x, param, 32))


def test_partial_last_simdgroup():
    # 40 threads: the second simdgroup has 8 lanes; reading a missing lane
    # gives NaN, reductions cover the lanes that exist.
    x = np.arange(40, dtype=np.float32)
    out = kernels("simd_ops").launch(
        "shuffles",
        {0: x, 1: nan_f32(40 * 8), 2: np.array([5], np.uint32)},
        threadgroup=(40, 1, 1),
    )
    ref = np.concatenate([shuffles_reference(x[:32], 5, 32), shuffles_reference(x[32:], 5, 8)])
    np.testing.assert_array_equal(out[1].reshape(40, 8), ref)


def test_prefix_sums():
    x = np.random.default_rng(0).integers(-50, 50, 64).astype(np.int32)
    out = kernels("simd_ops").launch(
        "prefix_sums", {0: x, 1: np.zeros(128, np.int32)}, threadgroup=(64, 1, 1)
    )[1].reshape(64, 2)
    for base in (0, 32):
        v = x[base : base + 32]
        np.testing.assert_array_equal(out[base : base + 32, 0], np.cumsum(v))
        np.testing.assert_array_equal(out[base : base + 32, 1], np.cumsum(v) - v)


def test_half_simd_sum_rounds_in_half():
    x = (np.random.default_rng(1).standard_normal(128) * 100).astype(np.float16)
    out = kernels("simd_ops").launch(
        "half_sum",
        {0: x, 1: np.full(4, np.nan, np.float16)},
        grid=(2, 1, 1),
        threadgroup=(64, 1, 1),
    )[1]
    for g in range(4):
        acc = list(x[32 * g : 32 * g + 32])
        while len(acc) > 1:  # the butterfly order, rounding each step
            h = len(acc) // 2
            acc = [np.float16(acc[i] + acc[i + h]) for i in range(h)]
        assert out[g] == acc[0]


# ---------------------------------------------------------------------------
# half, bfloat and vectors

SPECIAL = np.array(
    [0.0, -0.0, 1.0, -2.5, 65504.0, 65519.99, 65520.0, -70000.0, 1e-8, 6e-8, 3e-8,
     2.9802322e-08, 5.9604645e-08, 1e-5, -1e-7, 0.1, 1 / 3, np.inf, -np.inf, np.nan,
     3.0e38, 1.0000001, 1.00390625, 1.01171875, 1.0078125, 2.0**-126, 2.0**-140],
    dtype=np.float32,
)


def test_half_and_bfloat_conversions_round_to_nearest_even():
    rng = np.random.default_rng(2)
    x = np.concatenate([SPECIAL, rng.standard_normal(200).astype(np.float32) * 1e3,
                        (rng.standard_normal(100) * 1e-6).astype(np.float32)])
    n = len(x)
    out = kernels("conversions").launch(
        "to_narrow",
        {0: x, 1: np.zeros(n, np.uint16), 2: np.zeros(n, np.uint16), 3: nan_f32(2 * n)},
        grid=(n, 1, 1),
        threadgroup=(1, 1, 1),
    )
    with np.errstate(over="ignore"):
        want_half = x.astype(np.float16)
    nan = np.isnan(x)
    np.testing.assert_array_equal(out[1][~nan], want_half.view(np.uint16)[~nan])
    assert np.all((out[1][nan] & 0x7C00) == 0x7C00) and np.all(out[1][nan] & 0x3FF)
    want_bf = emu.float_to_bfloat16_bits(x)
    np.testing.assert_array_equal(out[2], want_bf)
    back = out[3].reshape(n, 2)
    np.testing.assert_array_equal(back[:, 0], want_half.astype(np.float32))
    np.testing.assert_array_equal(back[:, 1], emu.bfloat16_bits_to_float(want_bf))


def test_bfloat_helpers_round_trip():
    x = np.array([1.0, 1.00390625, 1.01171875, -3.0e38, np.inf], np.float32)
    bits = emu.float_to_bfloat16_bits(x)
    np.testing.assert_array_equal(bits, [0x3F80, 0x3F80, 0x3F82, 0xFF62, 0x7F80])
    np.testing.assert_array_equal(emu.bfloat16_bits_to_float(bits)[[0, 4]], [1.0, np.inf])


def test_half_arithmetic():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(64) * 30).astype(np.float16)
    y = (rng.standard_normal(64) * 30).astype(np.float16)
    out = kernels("conversions").launch(
        "half_arithmetic",
        {0: x, 1: y, 2: np.zeros(256, np.float16)},
        grid=(2, 1, 1),
        threadgroup=(32, 1, 1),
    )[2].reshape(64, 4)
    f, g = x.astype(np.float32), y.astype(np.float32)
    np.testing.assert_array_equal(out[:, 0], x + y)
    np.testing.assert_array_equal(out[:, 1], x * y)
    np.testing.assert_array_equal(out[:, 2], (f * g + f).astype(np.float16))
    np.testing.assert_array_equal(
        out[:, 3], np.maximum(x, y) - (np.float16(2) * np.minimum(x, y)).astype(np.float16)
    )


def test_vector_math():
    x = np.array([[0.5, -1.5, 2.0, np.inf], [3.0, 0.25, -4.0, 1.0]], np.float32)
    out = kernels("conversions").launch(
        "vector_math",
        {0: x, 1: np.zeros((4, 4), np.float32), 2: np.zeros((2, 2), np.float16)},
        grid=(2, 1, 1),
        threadgroup=(1, 1, 1),
    )
    for i, v in enumerate(x):
        with np.errstate(invalid="ignore"):
            r = np.exp2(v) * 2 + v - np.abs(v)
        r[[0, 1]] = r[[1, 0]]
        np.testing.assert_allclose(out[1][2 * i], r, rtol=1e-6)
        np.testing.assert_allclose(
            out[1][2 * i + 1],
            [np.clip(v[0], -1, 1), np.exp(v[1]), np.log2(abs(v[2]) + 1), float(not np.isfinite(v[3]))],
            rtol=1e-6,
        )
        np.testing.assert_array_equal(out[2][i], v[:2].astype(np.float16))


# ---------------------------------------------------------------------------
# simdgroup_matrix


def fragment_coords():
    lane = np.arange(32)
    qid = lane // 4
    row = (qid & 4) + (lane // 2) % 4
    col = (qid & 2) * 2 + (lane % 2) * 2
    return row, col


def test_fragment_layout():
    src = np.arange(64, dtype=np.float32)
    out = kernels("simdgroup_matrix_ops").launch(
        "fragment_elements", {0: src, 1: nan_f32(64)}
    )[1].reshape(32, 2)
    row, col = fragment_coords()
    np.testing.assert_array_equal(out[:, 0], row * 8 + col)
    np.testing.assert_array_equal(out[:, 1], row * 8 + col + 1)
    # Every element of the 8x8 matrix is held by exactly one lane.
    assert sorted(out.ravel()) == list(range(64))


def test_fragment_written_by_layout_round_trips():
    src = np.random.default_rng(4).standard_normal(64).astype(np.float32)
    out = kernels("simdgroup_matrix_ops").launch(
        "fragment_from_layout", {0: src, 1: nan_f32(64)}
    )[1]
    np.testing.assert_array_equal(out, src)


def test_misused_fragment_layout_gives_wrong_matrix():
    src = np.random.default_rng(5).standard_normal(64).astype(np.float32)
    out = kernels("simdgroup_matrix_ops").launch(
        "fragment_wrong_layout", {0: src, 1: nan_f32(64)}
    )[1]
    assert not np.array_equal(out, src)
    assert np.sum(out != src) >= 48


def move_params(ss, ds, sox, soy, dox, doy, lt, st):
    return np.array([ss, ds, sox, soy, dox, doy, lt, st], dtype=np.uint32)


@pytest.mark.parametrize(
    "ss,sox,soy,lt,ds,dox,doy,st",
    [
        (8, 0, 0, 0, 8, 0, 0, 0),
        (13, 3, 2, 0, 11, 1, 4, 0),
        (13, 3, 2, 1, 11, 1, 4, 0),
        (16, 8, 5, 0, 9, 0, 1, 1),
        (16, 8, 5, 1, 9, 1, 0, 1),
    ],
)
def test_load_store_stride_origin_transpose(ss, sox, soy, lt, ds, dox, doy, st):
    rng = np.random.default_rng(ss + sox)
    src = rng.standard_normal(ss * 16).astype(np.float32)
    dst = nan_f32(ds * 16)
    out = kernels("simdgroup_matrix_ops").launch(
        "move", {0: src, 1: dst, 2: move_params(ss, ds, sox, soy, dox, doy, lt, st)}
    )[1]
    block = src.reshape(-1, ss)[soy : soy + 8, sox : sox + 8]
    m = block.T if lt else block
    want = dst.reshape(-1, ds).copy()
    want[doy : doy + 8, dox : dox + 8] = m.T if st else m
    np.testing.assert_array_equal(out.reshape(-1, ds), want)


@pytest.mark.parametrize("kernel,dtype,acc", [
    ("tile_matmul_float", np.float32, np.float32),
    ("tile_matmul_half", np.float16, np.float16),
    ("tile_matmul_half_float", np.float16, np.float32),
    ("tile_matmul_bfloat_float", "bfloat", np.float32),
])
@pytest.mark.parametrize("m,n,k", [(8, 8, 8), (16, 24, 32), (40, 8, 16)])
@pytest.mark.parametrize("b_transposed", [0, 1])
def test_simdgroup_mma_matches_numpy(kernel, dtype, acc, m, n, k, b_transposed):
    rng = np.random.default_rng(m * 100 + n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    if dtype == "bfloat":
        a_in, b_in = emu.float_to_bfloat16_bits(a), emu.float_to_bfloat16_bits(b)
        a, b = emu.bfloat16_bits_to_float(a_in), emu.bfloat16_bits_to_float(b_in)
    else:
        a_in, b_in = a.astype(dtype), b.astype(dtype)
        a, b = a_in.astype(np.float32), b_in.astype(np.float32)
    b_buf = np.ascontiguousarray(b_in.T) if b_transposed else b_in
    c_in = c.astype(acc)
    out = kernels("simdgroup_matrix_ops").launch(
        kernel,
        {0: a_in, 1: b_buf, 2: c_in, 3: np.array([m, n, k, 0], np.uint32),
         4: np.array([b_transposed], np.uint32)},
        grid=(n // 8, m // 8, 1),
        threadgroup=(32, 1, 1),
    )[2]
    want = a.astype(np.float64) @ b + c_in.astype(np.float64)
    tol = 1e-5 if acc == np.float32 else 2e-2
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=tol, atol=tol * np.abs(want).max())


def test_diagonal_and_filled_matrices():
    out = kernels("simdgroup_matrix_ops").launch(
        "diagonal_and_fill", {0: nan_f32(192), 1: np.array([2.0, 3.0], np.float32)}
    )[0].reshape(3, 8, 8)
    np.testing.assert_array_equal(out[0], 2 * np.eye(8))
    np.testing.assert_array_equal(out[1], np.full((8, 8), 3.0))
    np.testing.assert_array_equal(out[2], np.full((8, 8), 6.0))


# ---------------------------------------------------------------------------
# Threadgroup memory, barriers, several threadgroups and simdgroups


def run_tiled_matmul(m, n, k, schedule, skip_barrier=0, seed=0, race_check=False):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out = kernels("tiled_matmul").launch(
        "tiled_matmul",
        {0: a, 1: b, 2: np.full((m, n), np.nan, np.float32), 3: np.array([m, n, k], np.int32)},
        constants={0: skip_barrier},
        grid=(-(-n // 32), -(-m // 32), 1),
        threadgroup=(128, 1, 1),
        schedule=schedule,
        race_check=race_check,
    )[2]
    return out, a.astype(np.float64) @ b


@pytest.mark.parametrize("m,n,k", [(32, 32, 16), (33, 65, 17), (96, 40, 47), (5, 7, 3)])
@pytest.mark.parametrize("schedule", ["fair", 1, 2])
def test_tiled_matmul(m, n, k, schedule):
    out, want = run_tiled_matmul(m, n, k, schedule)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("which", [1, 2])
def test_missing_barrier_is_caught(which):
    # Without the barrier after the tile loads, a simdgroup reads tiles
    # other threads have not written yet; without the one after the
    # multiplies, a simdgroup that runs ahead overwrites tiles another one
    # still reads. The adversarial schedules make both show.
    caught = 0
    for seed in SEEDS:
        out, want = run_tiled_matmul(64, 64, 64, seed, skip_barrier=which)
        caught += not np.allclose(out, want, rtol=1e-5, atol=1e-4)
    assert caught >= len(SEEDS) // 2


@pytest.mark.parametrize("which", [1, 2])
def test_race_check_reports_missing_barrier(which):
    # ThreadSanitizer sees the unordered accesses whatever the schedule.
    with pytest.raises(emu.EmulatorError, match="ThreadSanitizer: data race") as e:
        run_tiled_matmul(64, 64, 32, "fair", skip_barrier=which, race_check=True)
    assert "tiled_matmul.metal" in str(e.value)


def test_race_check_passes_correct_kernel():
    out, want = run_tiled_matmul(64, 64, 32, "fair", race_check=True)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def test_adversarial_schedule_shuffles_threadgroups():
    last = {
        tuple(kernels("faulty").launch(
            "overlapping_threadgroups", {0: np.zeros(32, np.uint32)}, grid=(8, 1, 1),
            schedule=seed)[0])
        for seed in SEEDS
    }
    assert len(last) > 1


def test_threadgroup_memory_starts_poisoned():
    out = kernels("faulty").launch(
        "read_unwritten_threadgroup_memory", {0: nan_f32(32) * 0}, threadgroup=(32, 1, 1)
    )[0]
    assert np.isnan(out).all()


def test_builtin_coordinates():
    grid, group = (3, 2, 2), (8, 4, 2)
    gsize = [g * t for g, t in zip(grid, group)]
    total = int(np.prod(gsize))
    out = kernels("dispatch").launch(
        "coordinates", {0: np.zeros(16 * total, np.uint32)}, grid=grid, threadgroup=group
    )[0].reshape(gsize[2], gsize[1], gsize[0], 16)
    z, y, x = np.meshgrid(*(np.arange(s) for s in gsize[::-1]), indexing="ij")
    lx, ly, lz = x % group[0], y % group[1], z % group[2]
    lindex = (lz * group[1] + ly) * group[0] + lx
    want = np.stack(
        [x, y, z, lx, ly, lz, x // group[0], y // group[1], z // group[2], lindex,
         lindex % 32, lindex // 32, np.full_like(x, 2), np.full_like(x, 64),
         np.full_like(x, 12), np.full_like(x, 7)],
        axis=-1,
    )
    np.testing.assert_array_equal(out, want)


def test_threadgroup_parameter_memory():
    x = np.random.default_rng(6).standard_normal(3 * 96).astype(np.float32)
    out = kernels("dispatch").launch(
        "group_sum",
        {0: x, 1: nan_f32(3)},
        threadgroup_memory={0: 16},
        grid=(3, 1, 1),
        threadgroup=(96, 1, 1),
    )[1]
    np.testing.assert_allclose(out, x.reshape(3, 96).sum(1), rtol=1e-5)


@pytest.mark.parametrize("has_bias", [False, True])
def test_namespaced_kernel_with_conditional_buffer(has_bias):
    x = np.arange(8, dtype=np.float32)
    bias = np.arange(8, dtype=np.float32) * 10
    bufs = {0: x, 1: nan_f32(8), **({2: bias} if has_bias else {})}
    out = kernels("declarations").launch(
        "demo_axpb", bufs, constants={10: has_bias, 11: 1.5}, threadgroup=(8, 1, 1)
    )[1]
    np.testing.assert_array_equal(out, 3.0 * x + (bias if has_bias else 0))


def test_conditional_buffer_is_required_when_enabled():
    with pytest.raises(emu.EmulatorError, match=r"no buffer is bound at index 2"):
        kernels("declarations").launch(
            "demo_axpb", {0: nan_f32(8), 1: nan_f32(8)}, constants={10: True, 11: 1.0},
            threadgroup=(8, 1, 1),
        )


def test_template_instantiated_from_another_namespace():
    out = kernels("declarations").launch(
        "repeat_int_3",
        {0: np.arange(4, dtype=np.int32), 1: np.full(12, -1, np.int32)},
        constants={10: False, 11: 1.0},
        threadgroup=(4, 1, 1),
    )[1]
    np.testing.assert_array_equal(out, (np.arange(4)[:, None] + np.arange(3)).ravel())


# ---------------------------------------------------------------------------
# What the emulator reports


def line_of(snippet, name="faulty"):
    """faulty.metal:LINE of the first line holding `snippet`."""
    with open(f"{emu.EMU_DIR}/kernels/{name}.metal") as fh:
        for n, line in enumerate(fh, 1):
            if snippet in line:
                return f"{name}.metal:{n}"
    raise AssertionError(snippet)


def expect_error(match, name, buffers, **kw):
    with pytest.raises(emu.EmulatorError, match=match):
        kernels(kw.pop("file", "faulty")).launch(name, buffers, **kw)


def test_divergent_barrier_is_a_deadlock():
    with pytest.raises(emu.EmulatorError) as e:
        kernels("faulty").launch("divergent_barrier", {0: nan_f32(32)})
    msg = str(e.value)
    assert "deadlock" in msg and "kernel 'divergent_barrier' threadgroup (0, 0, 0)" in msg
    assert "threads 0-15: wait at threadgroup_barrier at" in msg
    assert line_of("threadgroup_barrier") in msg
    assert "threads 16-31: returned from the kernel" in msg


def test_lane_skipping_a_collective_is_a_deadlock():
    expect_error(
        r"(?s)deadlock.*threads 0-15: wait at simd_sum at .*"
        + line_of("v = simd_sum(v)")
        + ".*threads 16-31: returned",
        "divergent_simd_sum",
        {0: nan_f32(32)},
    )


def test_lanes_at_different_collectives_are_reported():
    expect_error(r"simdgroup 0 diverged: lane 16 reached simd_shuffle_down", "mismatched_shuffles",
                 {0: nan_f32(32)})


def test_nonuniform_matrix_load_is_reported():
    expect_error("lanes passed different pointers", "nonuniform_load",
                 {0: nan_f32(80), 1: nan_f32(64)})


def test_out_of_bounds_device_write_is_caught():
    expect_error(
        r"(?s)heap-buffer-overflow.*" + line_of("out[gid + (gid == 31"),
        "write_past_end",
        {0: nan_f32(32)},
    )


def test_out_of_bounds_threadgroup_read_is_caught():
    # Indexing the array itself trips the bounds check; through a pointer,
    # the object-size check or the address sanitizer's redzone.
    expect_error(
        r"(?s)" + line_of("out[tid] = scratch[tid + 1]") + r".*index 32 out of bounds for type 'float \[32\]'",
        "read_past_threadgroup_array",
        {0: nan_f32(32)},
    )
    with pytest.raises(emu.EmulatorError) as e:
        kernels("faulty").launch("read_past_threadgroup_pointer", {0: nan_f32(32)})
    assert line_of("out[tid] = p[tid + 1]") in str(e.value)
    assert re.search("global-buffer-overflow|insufficient space for an object", str(e.value))


def test_stack_overflow_is_caught():
    expect_error(r"(?s)stack-overflow.*launch\(stack_kb=\.\.\.\) raises it", "huge_private_array",
                 {0: nan_f32(32)})


def test_wrong_buffer_index_fails():
    x = np.arange(32, dtype=np.float32)
    out = nan_f32(256)
    p = np.array([1], np.uint32)
    expect_error(r"reads `constant uint& param \[\[buffer\(2\)\]\]` but no buffer is bound at index 2",
                 "shuffles", {0: x, 1: out, 3: p}, file="simd_ops")
    expect_error(r"buffer 3 is bound but kernel 'shuffles' has no \[\[buffer\(3\)\]\]",
                 "shuffles", {0: x, 1: out, 2: p, 3: p}, file="simd_ops")


def test_buffer_that_cannot_hold_the_parameter_type_fails():
    x = np.arange(32, dtype=np.float32)
    expect_error(r"buffer 2 holds 2 bytes, which does not fit `constant uint& param",
                 "shuffles", {0: x, 1: nan_f32(256), 2: np.array([1], np.uint16)}, file="simd_ops")
    expect_error(r"buffer 0 holds 6 bytes, which does not fit `const device float\* in",
                 "shuffles", {0: np.zeros(3, np.uint16), 1: nan_f32(256),
                              2: np.array([1], np.uint32)}, file="simd_ops")


def test_function_constants_must_be_given_and_fit():
    bufs = {0: nan_f32(4), 1: nan_f32(4), 2: nan_f32(4), 3: np.array([2, 2, 1], np.int32)}
    k = kernels("tiled_matmul")
    with pytest.raises(emu.EmulatorError, match=r"function constant 0 \(`constant int skip_barrier`\) has no value"):
        k.launch("tiled_matmul", bufs, threadgroup=(128, 1, 1))
    with pytest.raises(emu.EmulatorError, match="does not fit `constant int skip_barrier`"):
        k.launch("tiled_matmul", bufs, constants={0: True}, threadgroup=(128, 1, 1))
    with pytest.raises(emu.EmulatorError, match="function constant 7 is not declared"):
        k.launch("tiled_matmul", bufs, constants={0: 0, 7: 1}, threadgroup=(128, 1, 1))


def test_unknown_kernel_name_lists_the_kernels():
    expect_error("no kernel with host name 'nope'; this file has: shuffles, prefix_sums, half_sum",
                 "nope", {}, file="simd_ops")


def test_missing_threadgroup_memory_length_fails():
    expect_error(r"uses `threadgroup float\* partial \[\[threadgroup\(0\)\]\]` but no threadgroup memory",
                 "group_sum", {0: nan_f32(32), 1: nan_f32(1)}, file="dispatch")


def test_bare_threadgroup_array_is_shared_by_the_threadgroup(tmp_path):
    """`threadgroup T x[N];` in a kernel body, as MLX declares its arrays,
    is one array of the threadgroup: each thread reads what another wrote
    before the barrier; and it is poisoned before each threadgroup (the
    second threadgroup's reads of the slots nobody wrote are NaN)."""
    src = tmp_path / "bare.metal"
    src.write_text(
        "#include <metal_stdlib>\nusing namespace metal;\n"
        "[[kernel]] void k(device float* o [[buffer(0)]], uint i [[thread_position_in_threadgroup]],\n"
        "                  uint g [[threadgroup_position_in_grid]]) {\n"
        "  threadgroup float t[64];\n  if (g == 0) { t[32 + i] = 1.0f; }\n  t[i] = float(i);\n"
        "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "  o[g * 64 + i] = t[31 - i];\n  o[g * 64 + 32 + i] = t[32 + i];\n}\n"
    )
    out = emu.load(str(src)).launch("k", {0: nan_f32(128)}, grid=(2, 1, 1), threadgroup=(32, 1, 1))[0]
    np.testing.assert_array_equal(out[:32], np.arange(32)[::-1])
    np.testing.assert_array_equal(out[32:64], np.ones(32))
    np.testing.assert_array_equal(out[64:96], np.arange(32)[::-1])
    assert np.isnan(out[96:]).all()


def test_instance_names_and_one_kernel_builds():
    """instance_names reads a file's instantiation list from its
    preprocessed text alone: every kernel of tile_ops.metal is an
    instantiation, so it names exactly what the built driver lists; a
    build with `only` holds that one kernel."""
    assert emu.instance_names(TILE_OPS) == set(kernels("tile_ops").kernels)
    one = emu.load(TILE_OPS, only="tile_row_ops_2x3")
    assert set(one.kernels) == {"tile_row_ops_2x3"}


def test_buffers_without_an_index_take_the_first_free_one(tmp_path):
    """A device or constant buffer parameter without [[buffer(n)]] (MLX's
    softmax declares all of its so) gets the index Metal's compiler assigns
    (the Metal Shading Language specification, "Locating Buffer, Texture,
    and Sampler Arguments"): in declaration order, the first index that no
    buffer parameter holds, explicit indices counting wherever they are
    declared. Here a, n and c land on 1, 3 and 4 around the explicit 0 and 2."""
    src = tmp_path / "auto_index.metal"
    src.write_text(
        "#include <metal_stdlib>\nusing namespace metal;\n"
        "[[kernel]] void k(const device float* a, device float* out [[buffer(0)]],\n"
        "                  constant int& n, const device float* b [[buffer(2)]], device float* c,\n"
        "                  uint i [[thread_position_in_grid]]) {\n"
        "  out[i] = a[i] + 10.0f * b[i] + 100.0f * float(n);\n  c[i] = 2.0f * a[i];\n}\n"
    )
    prog = emu.load(str(src))
    assert {p.name: p.index for p in prog.kernels["k"] if p.kind == "buffer"} == {
        "a": 1, "out": 0, "n": 3, "b": 2, "c": 4,
    }
    a, b = np.arange(32, dtype=np.float32), np.full(32, 3.0, np.float32)
    res = prog.launch("k", {0: nan_f32(32), 1: a, 2: b, 3: np.array([7], np.int32), 4: nan_f32(32)})
    np.testing.assert_array_equal(res[0], a + 30.0 + 700.0)
    np.testing.assert_array_equal(res[4], 2.0 * a)


ATOMICS = """#include <metal_stdlib>
using namespace metal;
[[kernel]] void atomics(device atomic_uint* count [[buffer(0)]], device atomic_float* total [[buffer(1)]],
                        device atomic_int* lo [[buffer(2)]], device atomic_int* hi [[buffer(3)]],
                        device uint* ticket [[buffer(4)]], uint i [[thread_position_in_grid]]) {
  ticket[i] = atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);
  atomic_fetch_add_explicit(total, float(i), memory_order_relaxed);
  atomic_fetch_min_explicit(lo, int(i) - 7, memory_order_relaxed);
  atomic_fetch_max_explicit(hi, int(i), memory_order_relaxed);
}
"""


@pytest.mark.parametrize("schedule,race_check", [("fair", False), (5, False), ("fair", True)],
                         ids=["fair", "adversarial", "race_check"])
def test_atomics_from_every_thread(tmp_path, schedule, race_check):
    """Metal's device atomics (MLX's atomic.h builds on them): each thread's
    fetch-add returns a distinct old value, the float and integer results
    hold every thread's update, and the race check sees atomics, not races."""
    src = tmp_path / "atomics.metal"
    src.write_text(ATOMICS)
    n = 256
    res = emu.load(str(src)).launch(
        "atomics",
        {0: np.zeros(1, np.uint32), 1: np.zeros(1, np.float32), 2: np.array([3], np.int32),
         3: np.array([-1], np.int32), 4: np.full(n, 0xFFFFFFFF, np.uint32)},
        grid=(4, 1, 1), threadgroup=(64, 1, 1), schedule=schedule, race_check=race_check,
    )
    assert res[0][0] == n
    np.testing.assert_array_equal(np.sort(res[4]), np.arange(n))
    assert res[1][0] == n * (n - 1) / 2
    assert (res[2][0], res[3][0]) == (-7, n - 1)


def test_member_template_specialized_in_its_class(tmp_path):
    """An explicit specialization of a member function template declared in
    its class (MLX's reduction/ops.h; g++ rejects the form) is built as the
    overload it is equivalent to, and chosen for its argument types; explicit
    specializations at namespace scope stay specializations."""
    src = tmp_path / "member_specialization.metal"
    src.write_text(
        "#include <metal_stdlib>\nusing namespace metal;\n"
        "struct Op {\n  template <typename T>\n  T twice(T x) thread { return x + x; }\n"
        "  template <>\n  float twice(float x) thread { return -x; }\n};\n"
        "template <typename T>\nT negated(T x) { return x; }\n"
        "template <>\nfloat negated<float>(float x) { return -x; }\n"
        "template <typename T>\nstruct Tag { static constexpr int v = 1; };\n"
        "template <>\nstruct Tag<float> { static constexpr int v = 2; };\n"
        "[[kernel]] void k(device float* o [[buffer(0)]], device int* p [[buffer(1)]],\n"
        "                  uint i [[thread_position_in_grid]]) {\n"
        "  Op op;\n  o[i] = op.twice(float(i)) + negated(float(i));\n"
        "  p[i] = op.twice(int(i)) + Tag<float>::v + Tag<int>::v;\n}\n"
    )
    res = emu.load(str(src)).launch("k", {0: nan_f32(32), 1: np.zeros(32, np.int32)})
    np.testing.assert_array_equal(res[0], -2.0 * np.arange(32))
    np.testing.assert_array_equal(res[1], 2 * np.arange(32) + 3)


def test_repeated_declarations_dropped_after_an_operator_definition():
    # `operator==`'s `=` once read as an initialiser, which ran the scan past
    # the function's body and out of its namespace.
    unit = (
        '# 1 "k.metal"\n'
        "namespace demo {\n"
        "struct A { int x; };\n"
        "constexpr bool operator==(A a, A b) { return a.x == b.x; }\n"
        "template <typename T> struct P;\n"
        "template <typename T> struct P;\n"
        "}\n"
    )
    out = metal_source.drop_repeated_declarations(unit, [])
    assert out.split("\n")[:5] == unit.split("\n")[:5]
    assert out.split("\n")[5].strip() == "" and out.split("\n")[6] == "}"
