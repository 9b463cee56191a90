"""The include graph keeps its layers: planners, kernels and tile library
below the backends, and no cycle.

The planners (attention_planner.cpp, na_planner.cpp) plan from a call and
the device's caps alone, and what the backends compute from a plan at eval
(launch_params.cpp) is plan-free: neither reaches a backend's header or the
op's (op/), nor do the kernels, the tile library or the kernel families'
device code (each family folder's own files: body, config, args, kernel
names, Metal and CUDA entry points). A family's host pieces (its cuda/ and
metal/ subfolders, its AOT tables) belong to the backends, and its
<folder>_instances.h to tools/gen_instances.py. The backends execute plans
and never plan: none reaches a planner's header.
Only the op layer (op/call_plans.cpp, the primitives) includes both. Read from the
`#include "mlx_fused_attn/..."` lines of the sources, so that a new include
that ties a layer back up fails here, on every machine."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s+"(mlx_fused_attn/[^"]+)"', re.M)
SOURCES = ("*.h", "*.cpp", "*.cuh", "*.cu", "*.metal")

BACKEND = "mlx_fused_attn/backend/"
OP = "mlx_fused_attn/op/"
# Whatever these reach is planning or plan-free and must stay below the
# backends.
PLANNING_ROOTS = (
    "mlx_fused_attn/plan/attention_planner.cpp",
    "mlx_fused_attn/plan/call_planning.cpp",
    "mlx_fused_attn/plan/family_planning.cpp",
    "mlx_fused_attn/plan/na_planner.cpp",
    "mlx_fused_attn/plan/quantized_attention_planner.cpp",
    "mlx_fused_attn/plan/launch_params.cpp",
)
DEVICE_CODE = ("mlx_fused_attn/kernels/", "mlx_fused_attn/tile/")
FAMILIES = "mlx_fused_attn/families/"
# The planning entry points the backends must never reach.
PLANNER_HEADERS = (
    "mlx_fused_attn/plan/attention_planner.h",
    "mlx_fused_attn/plan/na_planner.h",
    "mlx_fused_attn/plan/quantized_attention_planner.h",
    "mlx_fused_attn/op/call_plans.h",
)


def include_graph(repo):
    """{file: [files it includes]}, repository-relative, for the package's
    sources and the Metal entry points."""
    graph = {}
    for pattern in SOURCES:
        for path in (repo / "mlx_fused_attn").rglob(pattern):
            rel = path.relative_to(repo).as_posix()
            graph[rel] = INCLUDE.findall(path.read_text())
    return graph


def family_root_files(f):
    """[folder, name] of a file at the root of a family folder, else []."""
    parts = f[len(FAMILIES):].split("/") if f.startswith(FAMILIES) else []
    return parts if len(parts) == 2 else []


def is_device_code(f):
    """The kernels, the tile library, and the headers and entry points at
    the root of a family folder but its instance list (a generator's
    input)."""
    if f.startswith(DEVICE_CODE):
        return True
    root = family_root_files(f)
    return bool(root) and not root[1].endswith(("_instances.h", ".cpp"))


def is_family_planning(f):
    """A family's planning part: a .cpp at the root of its folder."""
    root = family_root_files(f)
    return bool(root) and root[1].endswith(".cpp")


def is_backend(f):
    """A backend's file, or a family's host piece (cuda/, metal/, aot/)."""
    if f.startswith(BACKEND):
        return True
    parts = f[len(FAMILIES):].split("/") if f.startswith(FAMILIES) else []
    return len(parts) == 3 and parts[1] in ("cuda", "metal", "aot")


def reached(graph, start):
    """Every file `start` includes, directly or through others."""
    seen, stack = set(), [start]
    while stack:
        for child in graph.get(stack.pop(), []):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


def cycles(graph):
    """The include cycles of `graph`, each as the path that closes it."""
    found, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for child in graph.get(node, []):
            if state.get(child) == "open":
                found.append(path[path.index(child):] + [child])
            elif child not in state:
                visit(child, path + [child])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def ties_up(graph):
    """(file, included file) pairs where planning, plan-free or device code
    reaches a backend or the op, or a backend reaches a planner."""
    ties = []
    below = [f for f in graph if is_device_code(f) or is_family_planning(f)]
    for start in list(PLANNING_ROOTS) + below:
        for f in sorted(reached(graph, start)):
            if is_backend(f) or f.startswith(OP):
                ties.append((start, f))
    for start in (f for f in graph if is_backend(f)):
        for f in sorted(reached(graph, start)):
            if f in PLANNER_HEADERS:
                ties.append((start, f))
    return ties


def test_no_tie_runs_back_up():
    graph = include_graph(REPO)
    for root in PLANNING_ROOTS:
        assert root in graph, f"{root} moved: update PLANNING_ROOTS"
    assert ties_up(graph) == []


def test_no_include_cycle():
    assert cycles(include_graph(REPO)) == []


def test_family_folders_are_classified():
    """A family's device code is below the backends; its host pieces are a
    backend's."""
    assert is_device_code(FAMILIES + "short_attention/short_attention.metal")
    assert is_device_code(FAMILIES + "short_attention/short_attention_config.h")
    assert not is_device_code(FAMILIES + "short_attention/short_attention_instances.h")
    assert is_family_planning(FAMILIES + "short_attention/short_attention_planning.cpp")
    assert not is_device_code(FAMILIES + "short_attention/short_attention_planning.cpp")
    assert is_backend(FAMILIES + "short_attention/cuda/short_attention_cuda.cpp")
    assert is_backend(FAMILIES + "short_attention/metal/short_attention_metal.cpp")
    assert is_backend(FAMILIES + "short_attention/aot/short_attention_d64.cu")
    assert not is_backend(FAMILIES + "short_attention/short_attention_kernel.cuh")
    graph = include_graph(REPO)
    assert any(f.startswith(FAMILIES) and is_device_code(f) for f in graph)
    assert any(f.startswith(FAMILIES) and is_backend(f) for f in graph)


def test_the_checks_see_a_tie_and_a_cycle():
    graph = {
        PLANNING_ROOTS[0]: ["mlx_fused_attn/plan_part.h"],
        "mlx_fused_attn/plan_part.h": [BACKEND + "gpu.h"],
        BACKEND + "gpu.h": [PLANNER_HEADERS[0]],
        FAMILIES + "f/f.metal": [FAMILIES + "f/cuda/f_cuda.h"],
        "mlx_fused_attn/a.h": ["mlx_fused_attn/b.h"],
        "mlx_fused_attn/b.h": ["mlx_fused_attn/a.h"],
    }
    ties = ties_up(graph)
    assert (PLANNING_ROOTS[0], BACKEND + "gpu.h") in ties
    assert (BACKEND + "gpu.h", PLANNER_HEADERS[0]) in ties
    assert (FAMILIES + "f/f.metal", FAMILIES + "f/cuda/f_cuda.h") in ties
    a, b = "mlx_fused_attn/a.h", "mlx_fused_attn/b.h"
    assert [a, b, a] in cycles(graph)
