"""mlx_fused_attn/families/neighborhood/neighborhood.metal run in the Metal emulator against a float64
explicit-mask reference (written here from the NATTEN definition, not from
the C++ geometry).

Every case binds buffers the way mlx_fused_attn/families/neighborhood/metal/na_metal.cpp
does (q 0, k 1, v 2, out 3, NaParams 4, NaGrid 5; grid (blocks, H, B),
threadgroup (32, warps)), poisons the output with NaN, and checks every
output element plus the padding between the output's heads, which must stay
untouched. The NaGrid comes from the C++ chooser (na_grid_choice.h,
through a small probe program), or from na_make_grid for a given split of the
warps over the axes, so that tiles of every shape run.
"""

import ctypes
import os
import re
import subprocess

import numpy as np
import pytest

from . import emu
from .cases import check, output, to_device
from .layouts import Layout, contiguous_last
from .na_params import NaGrid, NaParams

METAL = "mlx_fused_attn/families/neighborhood/neighborhood.metal"
DTYPES = ("float16", "bfloat16", "float32")
HEAD_DIMS = (32, 64, 128)


PROBE = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mlx_fused_attn/plan/na_grid_choice.h"
#include "mlx_fused_attn/families/neighborhood/na_config.h"
#include "mlx_fused_attn/families/neighborhood/na_kernel_name.h"

// names: every kernel name the Metal host can ask for.
// grid N n0 k0 d0 c0 n1 k1 d1 c1 n2 k2 d2 c2 WARP_ROWS WARPS KEY_BLOCK [w0 w1 w2]:
//   na_choose_grid, or na_make_grid with the given warps per axis.
int main(int argc, char** argv) {
  if (std::strcmp(argv[1], "names") == 0) {
    const fa::DType types[] = {
        fa::DType::Float16, fa::DType::BFloat16, fa::DType::Float32};
    for (int n = 1; n <= 3; ++n) {
      for (fa::DType t : types) {
#define FA_PRINT(d)                                                      \
  std::printf("%s\n", fa::na_kernel_name(n, t, d,                        \
      fa::choose_na_tiles(d, t, fa::Backend::Metal, n)).c_str());
        FA_NA_HEAD_DIMS(FA_PRINT)
#undef FA_PRINT
      }
    }
    return 0;
  }
  int i = 2;
  const int n_axes = std::atoi(argv[i++]);
  fa::NaAxis axes[3];
  for (int a = 0; a < 3; ++a) {
    axes[a].n = std::atoi(argv[i++]);
    axes[a].k = std::atoi(argv[i++]);
    axes[a].d = std::atoi(argv[i++]);
    axes[a].causal = std::atoi(argv[i++]);
  }
  const int warp_rows = std::atoi(argv[i++]);
  const int n_warps = std::atoi(argv[i++]);
  const int key_block = std::atoi(argv[i++]);
  fa::NaGrid g;
  if (i < argc) {
    int warps[3];
    for (int a = 0; a < 3; ++a) {
      warps[a] = std::atoi(argv[i++]);
    }
    g = fa::na_make_grid(axes, n_axes, warps, warp_rows);
  } else {
    g = fa::na_choose_grid(axes, n_axes, n_warps, warp_rows, key_block);
  }
  // NA_RUN=r NA_STAGES=s: runs of r tiles (na_run_for), where s stages allow.
  if (const char* run = std::getenv("NA_RUN")) {
    g = fa::na_run_for(g, axes, n_axes, key_block,
                       std::atoi(std::getenv("NA_STAGES")), 1, 0, std::atoi(run));
  }
  for (int a = 0; a < 3; ++a) {
    std::printf("%d %d %d\n", g.warps[a], g.extent[a], g.tiles[a]);
  }
  std::printf("%d %d\n", g.blocks, g.run);
}
"""

LAYOUT_PROBE = r"""
#include <cstddef>
#include <cstdio>

#include "mlx_fused_attn/families/neighborhood/na_grid.h"

int main() {
  std::printf("NaParams %zu\n", sizeof(fa::NaParams));
  std::printf("NaGrid %zu\n", sizeof(fa::NaGrid));
#define FA_OFF(S, f) std::printf(#S "." #f " %zu\n", offsetof(fa::S, f));
  FIELDS
}
"""


def _compile(tmp_path, source, name, defines=()):
    src = tmp_path / f"{name}.cpp"
    src.write_text(source)
    exe = tmp_path / name
    build = subprocess.run(
        [emu.CXX, "-std=c++17", *defines, "-I", emu.SHIM_DIR, "-I", emu.REPO_ROOT, str(src),
         "-o", str(exe)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    return exe


@pytest.fixture(scope="module")
def prog():
    return emu.load(METAL)


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("na_probe"), PROBE, "probe")


def _run_probe(probe, *args, env=None):
    return subprocess.run(
        [str(probe), *map(str, args)], check=True, capture_output=True, text=True, env=env
    ).stdout


def make_grid(probe, axes, n_axes, warp_rows, n_warps, key_block, warps=None, run=None):
    """The NaGrid of the C++ chooser, or of na_make_grid for `warps`; `run`
    = (tiles, stages): 1-D runs of tiles through na_run_for."""
    flat = [x for a in axes for x in (a["n"], a["k"], a["d"], int(a["causal"]))]
    extra = list(warps) if warps is not None else []
    env = None
    if run is not None:
        env = dict(os.environ, NA_RUN=str(run[0]), NA_STAGES=str(run[1]))
    out = _run_probe(probe, "grid", n_axes, *flat, warp_rows, n_warps, key_block, *extra,
                     env=env)
    rows = [list(map(int, line.split())) for line in out.splitlines()]
    g = NaGrid()
    for a in range(3):
        g.warps[a], g.extent[a], g.tiles[a] = rows[a]
    g.blocks, g.run = rows[3]
    return g


def kernel_for(prog, n_axes, dtype, head_dim, suffix=""):
    """(host name, bq, bk, warps) of the kernel the instantiation list has."""
    pat = re.compile(rf"fa_na{n_axes}d_{dtype}_d{head_dim}_bq(\d+)_bk(\d+)_wm(\d+){suffix}$")
    found = [(n, *map(int, m.groups())) for n in prog.kernels for m in [pat.match(n)] if m]
    assert len(found) == 1, f"{n_axes}-D {dtype} d{head_dim}: kernels {found}"
    return found[0]


# ---------------------------------------------------------------------------
# Layouts


def named_layout(layout, ndim):
    """The Layout of a [B, *spatial, H, D] array for `layout`: "dense";
    "padded" (a spare head slot after each token's heads); "transposed"
    (spatial axes stored in reverse order)."""
    n_axes = ndim - 3
    if layout == "transposed":
        return Layout((0, *range(n_axes, 0, -1), n_axes + 1, n_axes + 2), (0,) * ndim)
    pad = [0] * ndim
    if layout == "padded":
        pad[-2] = 1
    return Layout(range(ndim), pad)


def independent_layouts(n_axes):
    """Per input, its own order of [B, *spatial, H] (outermost first; D
    innermost) and its own spare batch entries, positions and heads, so that
    no two of q, k, v and the output share a batch or head stride."""
    axes = list(range(n_axes + 2))
    head = n_axes + 1
    spatial = [1] * n_axes
    return {
        "q": contiguous_last(axes, [1, *spatial, 2], n_axes + 3),
        "k": contiguous_last([head, *axes[:-1]], [2, *[0] * n_axes, 1], n_axes + 3),
        "v": contiguous_last(axes[::-1], [1, *spatial, 3], n_axes + 3),
        "out": contiguous_last([*axes[1:], 0], [3, *spatial, 1], n_axes + 3),
    }


def stored(values, layout, fill):
    """values [B, *spatial, H, D] in `layout` (a Layout, or a name for
    named_layout), padding set to `fill`. Returns (storage, the Layout, the
    view's element strides in NaParams order: batch, axis 0..2 (0 for
    unused), head)."""
    n_axes = values.ndim - 3
    if isinstance(layout, str):
        layout = named_layout(layout, values.ndim)
    store, st = layout.place(values, fill)
    strides = [st[0]] + list(st[1 : 1 + n_axes]) + [0] * (3 - n_axes) + [st[-2]]
    assert st[-1] == 1
    return store, layout, strides


# ---------------------------------------------------------------------------
# Reference


def axis_allowed(n, k, d, causal):
    """allowed[i, j] along one axis, from the NATTEN definition."""
    allowed = np.zeros((n, n), bool)
    for i in range(n):
        g, j = i % d, i // d
        m = len(range(g, n, d))
        if causal:
            idx = range(max(0, j - k + 1), j + 1)
        else:
            start = min(max(j - k // 2, 0), m - k)
            idx = range(start, start + k)
        for t in idx:
            allowed[i, g + t * d] = True
    return allowed


def reference(q, k, v, kernel, dilation, causal, scale):
    spatial = q.shape[1:-2]
    allowed = np.ones((1, 1), bool)
    for n, ks, d, c in zip(spatial, kernel, dilation, causal):
        allowed = np.kron(allowed, axis_allowed(n, ks, d, c))
    B, H = q.shape[0], q.shape[-2]
    L = int(np.prod(spatial))
    qf, kf, vf = (x.reshape(B, L, H, -1) for x in (q, k, v))
    s = scale * np.einsum("blhd,bmhd->bhlm", qf, kf)
    s = np.where(allowed, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhlm,bmhd->blhd", p, vf).reshape(q.shape)


# ---------------------------------------------------------------------------
# One launch


def run_case(
    prog,
    probe,
    spatial,
    kernel,
    dilation=None,
    causal=None,
    *,
    dtype="float16",
    D=32,
    B=1,
    H=2,
    layout="dense",
    layouts=None,
    warps=None,
    seed=0,
    schedule="fair",
    race_check=False,
    suffix="",
    run=None,
    scale=None,
):
    n_axes = len(spatial)
    dilation = dilation or (1,) * n_axes
    causal = causal or (False,) * n_axes
    rng = np.random.default_rng(seed)
    shape = (B, *spatial, H, D)
    places = {"q": layout, "k": layout, "v": layout, "out": "padded", **(layouts or {})}
    q_dev, q64 = to_device(rng.standard_normal(shape), dtype)
    k_dev, k64 = to_device(rng.standard_normal(shape), dtype)
    v_dev, v64 = to_device(rng.standard_normal(shape), dtype)
    nan = to_device(np.full(shape, np.nan), dtype)[0]
    # Inputs' padding is NaN too: a read outside the view shows in the output.
    q_store, _, q_str = stored(q_dev, places["q"], fill=nan.flat[0])
    k_store, _, k_str = stored(k_dev, places["k"], fill=nan.flat[0])
    v_store, _, v_str = stored(v_dev, places["v"], fill=nan.flat[0])
    o_store, o_layout, o_str = stored(nan, places["out"], fill=nan.flat[0])

    name, bq, bk, n_warps = kernel_for(prog, n_axes, dtype, D, suffix)
    axes = [dict(n=n, k=ks, d=d, causal=c) for n, ks, d, c in zip(spatial, kernel, dilation, causal)]
    axes += [dict(n=1, k=1, d=1, causal=False)] * (3 - n_axes)
    grid = make_grid(probe, axes, n_axes, bq // n_warps, n_warps, bk, warps, run)
    if run is not None and len(run) == 3:
        # Runs where every actual box fits the stages, which na_run_for's
        # worst-case bound would not allow.
        grid.run = run[0]
        grid.blocks = dilation[0] * -(-grid.tiles[0] // run[0])
    if run is not None:
        assert grid.run > 1, f"no runs of tiles for {spatial} {kernel}: {list(grid.tiles)}"
    scale = D**-0.5 if scale is None else scale
    params = NaParams(
        B=B,
        H=H,
        D=D,
        D_v=D,
        n_axes=n_axes,
        L=int(np.prod(spatial)),
        scale_log2=scale * np.log2(np.e),
        q_strides=tuple(q_str),
        k_strides=tuple(k_str),
        v_strides=tuple(v_str),
        o_strides=tuple(o_str),
    )
    for a, ax in enumerate(axes):
        params.axes[a].n, params.axes[a].k, params.axes[a].d = ax["n"], ax["k"], ax["d"]
        params.axes[a].causal = int(ax["causal"])
    res = prog.launch(
        name,
        buffers={0: q_store, 1: k_store, 2: v_store, 3: o_store, 4: params, 5: grid},
        grid=(grid.blocks, H, B),
        threadgroup=(32, n_warps, 1),
        schedule=schedule,
        race_check=race_check,
    )
    fused = output(res[3], o_layout, dtype)
    check(
        fused,
        reference(q64, k64, v64, kernel, dilation, causal, scale),
        dtype,
        f"{name} spatial={spatial} kernel={kernel} dilation={dilation} causal={causal} "
        f"B={B} H={H} layout={layouts or layout} warps={list(grid.warps)} seed={seed}",
    )
    return grid


# ---------------------------------------------------------------------------
# Bindings and names


@pytest.mark.parametrize("defines", [[], emu.METAL_DEFINES], ids=["host", "emulated_metal"])
def test_struct_layouts_match_the_headers(tmp_path, defines):
    fields = "".join(
        f"FA_OFF({cls.__name__}, {f})" for cls in (NaParams, NaGrid) for f, _ in cls._fields_
    )
    exe = _compile(tmp_path, LAYOUT_PROBE.replace("FIELDS", fields), "layout", defines)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    got = dict(line.split() for line in out.splitlines())
    for cls in (NaParams, NaGrid):
        assert int(got.pop(cls.__name__)) == ctypes.sizeof(cls)
        for f, _ in cls._fields_:
            assert int(got[f"{cls.__name__}.{f}"]) == getattr(cls, f).offset, f"{cls.__name__}.{f}"


def test_host_names_match_the_instantiation_list(prog, probe):
    assert sorted(_run_probe(probe, "names").split()) == sorted(prog.kernels)


def test_buffers_match_the_structs(prog):
    for name, params in prog.kernels.items():
        sizes = {p.index: p.element_size for p in params if p.kind == "buffer"}
        assert sizes[4] == ctypes.sizeof(NaParams) and sizes[5] == ctypes.sizeof(NaGrid), name


# ---------------------------------------------------------------------------
# The grid chooser


def test_chooser_makes_compact_tiles(probe):
    """On CUDA's tiles (8 warps of 16 rows, 32-key blocks): a long 1-D axis
    puts every warp on it; 128 x 128 with 7 x 7 takes 8 x 16 query tiles
    (14 x 22 keys each), and a deep 3-D volume splits its warps over z and
    y."""
    unit = dict(n=1, k=1, d=1, causal=False)
    g = make_grid(probe, [dict(n=16384, k=7, d=1, causal=False), unit, unit], 1, 16, 8, 32)
    assert list(g.warps) == [8, 1, 1] and list(g.extent) == [128, 1, 1] and g.blocks == 128
    ax = dict(n=128, k=7, d=1, causal=False)
    g = make_grid(probe, [ax, ax, unit], 2, 16, 8, 32)
    assert list(g.extent) == [8, 16, 1] and list(g.tiles) == [16, 8, 1] and g.blocks == 128
    ax = dict(n=32, k=5, d=1, causal=False)
    g = make_grid(probe, [ax, ax, ax], 3, 16, 8, 32)
    assert g.warps[0] * g.warps[1] == 8 and g.warps[2] == 1 and g.warps[0] > 1 and g.warps[1] > 1


def test_dilation_multiplies_the_tiles(probe):
    """Tiles lie inside one dilation group: 3 groups of up to 34 positions,
    each covered by one 64-row tile."""
    unit = dict(n=1, k=1, d=1, causal=False)
    g = make_grid(probe, [dict(n=100, k=5, d=3, causal=False), unit, unit], 1, 8, 8, 32)
    assert g.tiles[0] == 1 and g.blocks == 3


# ---------------------------------------------------------------------------
# The kernel

CASES = [  # spatial, kernel, dilation, causal, dtype, head dim
    ((33,), (7,), None, None, "float16", 32),
    ((150,), (13,), None, None, "float32", 64),  # three tiles
    ((40,), (40,), None, None, "bfloat16", 128),  # kernel = axis: full attention
    ((50,), (5,), (3,), None, "float32", 32),  # dilation groups of 17, 17, 16
    ((129,), (5,), (2,), None, "float16", 64),  # the short group's second tile is empty
    ((37,), (6,), (2,), (True,), "bfloat16", 32),
    ((9, 12), (3, 5), (1, 2), None, "float16", 64),
    ((10, 11), (4, 3), (2, 1), (True, False), "bfloat16", 32),  # causal on one axis
    ((8, 8), (8, 8), None, None, "float32", 128),
    ((20, 19), (7, 7), None, None, "float16", 32),  # several tiles on both axes
    ((5, 6, 7), (3, 3, 3), (1, 1, 2), (False, True, False), "float16", 32),
    ((4, 6, 5), (2, 5, 5), (2, 1, 1), (False, False, True), "float32", 64),
    ((6, 3, 10), (3, 3, 4), None, None, "bfloat16", 128),
]


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: "x".join(map(str, CASES[i][0])))
def test_matches_explicit_mask(prog, probe, case):
    spatial, kernel, dilation, causal, dtype, D = CASES[case]
    run_case(prog, probe, spatial, kernel, dilation, causal, dtype=dtype, D=D, seed=case)


@pytest.mark.parametrize("warps", [(8, 1, 1), (4, 2, 1), (2, 4, 1), (1, 8, 1)])
def test_every_split_of_the_warps(prog, probe, warps):
    """The kernel follows whatever tile shape the grid gives: from 8 x 8
    queries to 1 x 64, ragged on both axes, with dilation on one."""
    run_case(prog, probe, (13, 21), (5, 3), (1, 2), dtype="float32", warps=warps, seed=sum(warps))


@pytest.mark.parametrize("scale", [-0.3, 0.0])
def test_scale_that_is_not_positive(prog, probe, scale):
    """The softmax's FFMA takes only a positive scale (the mask's -inf must
    stay -inf), so NaBlockMasks::apply scales the scores first and the FFMA
    by 1: a negative scale reverses the ranking, zero gives each row the
    mean of its window's values."""
    run_case(prog, probe, (33,), (7,), dtype="float32", D=32, scale=scale)


def test_3d_split_over_every_axis(prog, probe):
    run_case(prog, probe, (6, 7, 9), (3, 5, 3), (2, 1, 1), (True, False, False),
             dtype="float32", warps=(2, 2, 2), seed=11)


@pytest.mark.parametrize("layout", ["padded", "transposed"])
def test_strided_inputs_batches_and_heads(prog, probe, layout):
    """Strides from NaParams: spare head slots, spatial axes stored in
    reverse order; several batch entries and heads."""
    run_case(prog, probe, (7, 9), (3, 5), dtype="bfloat16", D=64, B=2, H=3, layout=layout, seed=5)


@pytest.mark.parametrize(
    "spatial,kernel,dtype,D",
    [((21,), (5,), "float32", 32), ((6, 7), (3, 5), "float16", 64), ((4, 5, 3), (3, 3, 3), "bfloat16", 32)],
    ids=["1d", "2d", "3d"],
)
def test_independent_batch_and_head_strides(prog, probe, spatial, kernel, dtype, D):
    """B = 2, H = 3, every input and the output in its own layout
    (independent_layouts), every axis count."""
    run_case(prog, probe, spatial, kernel, dtype=dtype, D=D, B=2, H=3,
             layouts=independent_layouts(len(spatial)), seed=40 + len(spatial))


def test_every_instance(prog, probe):
    """Each kernel of the instantiation list, launched by its host name on a
    small input of its axis count, dtype and head dim (checked against the
    reference as every case is)."""
    shapes = {1: ((19,), (5,)), 2: ((5, 6), (3, 3)), 3: ((3, 4, 5), (3, 3, 3))}
    for i, name in enumerate(sorted(prog.kernels)):
        m = re.fullmatch(r"fa_na(\d)d_(\w+?)_d(\d+)_bq\d+_bk\d+_wm\d+", name)
        n_axes, dtype, D = int(m.group(1)), m.group(2), int(m.group(3))
        spatial, kernel = shapes[n_axes]
        run_case(prog, probe, spatial, kernel, dtype=dtype, D=D, B=1, H=2, seed=i)


@pytest.mark.parametrize("seed", [1, 2])
def test_adversarial_schedules(prog, probe, seed):
    """A simdgroup running far ahead between barriers finds the K/V block
    and key coordinates of its own iteration, not the next one's."""
    run_case(prog, probe, (11, 10), (5, 3), dtype="float16", warps=(4, 2, 1), seed=seed,
             schedule=seed)


def test_race_check(prog, probe):
    """ThreadSanitizer: every threadgroup-memory access (K, V, coordinates)
    ordered by a barrier."""
    run_case(prog, probe, (9, 10), (3, 3), dtype="float32", warps=(4, 2, 1), race_check=True)


# ---------------------------------------------------------------------------
# CUDA's pipeline (several stages, 32-key blocks) on the same body


@pytest.fixture(scope="module")
def stages_prog():
    return emu.load("tests/metal_emu/kernels/na_stages.metal")


@pytest.mark.parametrize(
    "spatial,kernel,dilation,causal,dtype,D,suffix,schedule",
    [
        ((300,), (63,), None, None, "float16", 64, "_st3", "fair"),
        ((200,), (7,), (3,), (True,), "float16", 64, "_st3", 4),
        ((19, 40), (5, 13), (1, 2), (True, False), "float16", 64, "_st3", 5),
        ((7, 9, 12), (3, 5, 5), (2, 1, 1), None, "float32", 32, "_st2", 6),
        # Six stages: 1-D boxes of up to 6 blocks (64 + k - 1 keys) resident,
        # longer ones (k = 191) in the ring; 2-D 5 x 5 boxes (12 x 12) resident.
        ((300,), (63,), None, None, "float16", 64, "_st6", 7),
        ((300,), (191,), None, None, "float16", 64, "_st6", "fair"),
        ((210,), (7,), (4,), (True,), "float16", 64, "_st6", 8),
        ((19, 40), (5, 5), (1, 2), (False, True), "float16", 64, "_st6", 9),
    ],
)
def test_pipelined_stages(stages_prog, probe, spatial, kernel, dilation, causal, dtype, D,
                          suffix, schedule):
    """Blocks in flight in a ring of stages, each with its key coordinates;
    a warp skipping blocks still meets every barrier (adversarial schedules
    let one warp run ahead)."""
    run_case(stages_prog, probe, spatial, kernel, dilation, causal, dtype=dtype, D=D,
             suffix=suffix, schedule=schedule, seed=len(spatial))


def test_pipelined_stages_race_check(stages_prog, probe):
    """ThreadSanitizer on the ring: a stage is refilled only after every
    warp has left it, and read only after the barrier that follows its
    copies."""
    run_case(stages_prog, probe, (9, 21), (3, 7), dtype="float16", D=64, suffix="_st3",
             race_check=True)


def test_resident_box_race_check(stages_prog, probe):
    """ThreadSanitizer on a resident box: every block's copies are ordered
    before any warp reads them by the one barrier after the loads."""
    run_case(stages_prog, probe, (150,), (31,), dtype="float16", D=64, suffix="_st6",
             race_check=True)


# ---------------------------------------------------------------------------
# 1-D runs of tiles (NaGrid::run): a threadgroup streams the keys of
# consecutive tiles through a ring of key blocks, copying the next tile's
# blocks while it computes the current one (CUDA's 1-D path on big inputs)


@pytest.mark.parametrize(
    "spatial,kernel,dilation,causal,run,schedule",
    [
        ((1000,), (63,), None, None, 4, "fair"),  # boxes of 5 blocks; a ragged last run
        ((1000,), (65,), None, None, 3, 10),  # the widest kernel a ring of 6 takes
        ((700,), (7,), None, None, 5, 11),
        ((515,), (31,), (2,), None, 3, 12),  # dilation groups of 258 and 257
        ((600,), (20,), (3,), (True,), 2, "fair"),  # causal: boxes grow at the start
        ((333,), (9,), None, (True,), 6, 13),
    ],
)
def test_runs_of_tiles(stages_prog, probe, spatial, kernel, dilation, causal, run, schedule):
    """Each tile's blocks landed before its warps read them, a stage refilled
    only after every warp has left it, blocks that did not fit beside the
    previous box (at the borders, where boxes shift unevenly) copied late,
    Q of the next tile loaded early; every output element checked."""
    run_case(stages_prog, probe, spatial, kernel, dilation, causal, dtype="float16", D=64,
             suffix="_st6", schedule=schedule, run=(run, 6), seed=run)


def test_runs_of_tiles_race_check(stages_prog, probe):
    """ThreadSanitizer on the ring: copies into a stage ordered after the
    last reads of its previous block, reads after the barrier that follows
    the copies."""
    run_case(stages_prog, probe, (400,), (41,), dtype="float16", D=64, suffix="_st6",
             run=(3, 6), race_check=True)


def test_run_needs_a_stage_beside_the_box(probe):
    """A box that could take every stage (k = 67 with 64-query tiles and
    32-key blocks: 5 blocks at best, 6 at worst alignment) keeps a tile a
    threadgroup; so do 2-D grids."""
    axes = [dict(n=1000, k=67, d=1, causal=False)] + [dict(n=1, k=1, d=1, causal=False)] * 2
    assert make_grid(probe, axes, 1, 8, 8, 32, run=(4, 6)).run == 1
    axes[0]["k"] = 65
    assert make_grid(probe, axes, 1, 8, 8, 32, run=(4, 6)).run == 4
    axes2 = [dict(n=40, k=5, d=1, causal=False)] * 2 + [dict(n=1, k=1, d=1, causal=False)]
    assert make_grid(probe, axes2, 2, 8, 8, 32, run=(4, 6)).run == 1


@pytest.mark.parametrize(
    "spatial,kernel,dilation,causal,run",
    [
        ((1000,), (33,), None, None, 4),
        ((515,), (31,), (2,), None, 3),
        ((333,), (9,), None, (True,), 6),
    ],
)
def test_runs_with_late_copies(stages_prog, probe, spatial, kernel, dilation, causal, run):
    """A ring of four stages beside boxes of up to four blocks: the next
    tile's last blocks often do not fit beside the current box and are
    copied at the top of their own tile, after one more barrier (cases
    picked by simulating the ring's block indices)."""
    run_case(stages_prog, probe, spatial, kernel, dilation, causal, dtype="float16", D=64,
             suffix="_st4", schedule=run, run=(run, 4, "forced"), seed=run)
    run_case(stages_prog, probe, spatial, kernel, dilation, causal, dtype="float16", D=64,
             suffix="_st4", run=(run, 4, "forced"), race_check=True, seed=run + 1)
