"""A kernel family is one folder of mlx_fused_attn/families/ and one line of
its registry (families/registry.h): every folder has its line and every
line its folder and files, and the build and the tools find a family's
files from its folder, so that none of them names a family.

What the build and the tools pick up from a folder: CMakeLists.txt its
*.cpp (the planning parts); cmake/metal.cmake its .metal files (the
metallib and the JIT text) and metal/*.cpp; cmake/cuda.cmake its
*_kernel.cuh (the NVRTC text), cuda/*.cpp and aot/*.cu;
tools/gen_instances.py its <folder>_instances.h; the emulator's JIT texts,
the conformance pass, the strict check and the mutation tool its .metal
files. The planner calls plan_<name> of each FA_ATTENTION_CANDIDATES line,
and the backends its prepare_<name> and run_<name> (its folder's
cuda/<name>_cuda.cpp and metal/<name>_metal.cpp); the plan's tiles variant
holds its tiles type (plan/candidate_tiles.h, by tools/gen_instances.py)."""

import pathlib
import re
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import family_registry  # noqa: E402
from family_registry import FAMILIES_DIR, families, folders  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from metal_emu import jit_text  # noqa: E402

# The files that find the families by folder and must not name one.
DISCOVERING = (
    "CMakeLists.txt",
    "cmake/cuda.cmake",
    "cmake/metal.cmake",
    "cmake/flatten_source.py",
    "cmake/build_metallib.py",
    "tools/gen_instances.py",
    "tools/mutation/scope.py",
    "tools/mutation/worker.py",
    "tools/mutation/run.py",
    "tools/mutation/mutants.py",
    "tests/metal_emu/emu.py",
    "tests/metal_emu/conformance.py",
    "tests/metal_emu/jit_text.py",
    "tests/metal_emu/strict_check.py",
    "tests/metal_host/check_metal_host.py",
    "tests/metal_emu/test_strict_check.py",
    "mlx_fused_attn/plan/kernel_family.h",
    "mlx_fused_attn/plan/kernel_family.cpp",
    "mlx_fused_attn/plan/family_planning.h",
    "mlx_fused_attn/plan/family_planning.cpp",
    "mlx_fused_attn/backend/metal/kernel_library.cpp",
    "mlx_fused_attn/backend/cuda/attention_cuda.cpp",
    "mlx_fused_attn/backend/cuda/attention_launch.h",
    "mlx_fused_attn/backend/cuda/attention_launch.cpp",
    "mlx_fused_attn/backend/metal/attention_dispatch.h",
    "mlx_fused_attn/plan/launch_params.cpp",
    "mlx_fused_attn/plan/kernel_switches.h",
)
# The GPU interface's implementations, which run a plan through its
# family's own launch, found from the registry: they name no family.
DISPATCHING = (
    "mlx_fused_attn/backend/cuda/attention_cuda.cpp",
    "mlx_fused_attn/backend/metal/attention_metal.cpp",
)


def test_every_folder_has_a_registry_line_and_every_line_a_folder():
    listed = {f.folder for f in families()}
    assert set(folders()) == listed, "a folder of mlx_fused_attn/families/ without a line in registry.h, or the reverse"


def test_names_and_enumerators_are_unique():
    for field in ("name", "enumerator"):
        values = [getattr(f, field) for f in families()]
        assert len(values) == len(set(values)), field


def test_each_family_has_its_metal_entry_point():
    for f in families():
        assert f.metal_source.is_file(), f"{f.name}: no {f.metal_source.relative_to(REPO)}"
    for folder in folders():
        names = {p.stem for p in (FAMILIES_DIR / folder).glob("*.metal")}
        assert names == {f.name for f in families() if f.folder == folder}, folder


def test_cuda_sources_are_the_folders_with_entry_points():
    """cmake/cuda.cmake keys a folder's NVRTC text by the folder's name; the
    backend asks for it by family_name(): the two agree for every family
    with a CUDA source of its own."""
    with_entry_points = {d for d in folders() if family_registry.cuda_entry_points(d)}
    cuda = [f for f in families() if f.cuda_source]
    assert {f.folder for f in cuda} == with_entry_points
    assert all(f.name == f.folder for f in cuda)


def test_each_folder_has_an_instance_list():
    for folder in folders():
        lst = FAMILIES_DIR / folder / f"{folder}_instances.h"
        assert lst.is_file(), f"{folder}: no {lst.name} for tools/gen_instances.py"
        assert re.search(rf"\bvoid enumerate_{folder}\(\)", lst.read_text()), lst


def test_each_attention_candidate_has_its_planning_part():
    """The planner declares and calls plan_<name> for every candidate
    (plan/family_planning.h); the family's folder defines it."""
    names = family_registry.attention_candidates()
    assert names, "no FA_ATTENTION_CANDIDATES in registry.h"
    for name in names:
        f = family_registry.family(name)
        planning = f.path / f"{name}_planning.cpp"
        assert planning.is_file(), f"{name}: no {planning.relative_to(REPO)}"
        assert re.search(rf"\bSupport plan_{name}\(", planning.read_text()), planning


@pytest.mark.parametrize("name", family_registry.attention_candidates())
def test_each_attention_candidate_has_its_launch(name):
    """The backends take prepare_<name> and run_<name> from the family's
    folder (backend/cuda/attention_launch.h, backend/metal/attention_dispatch.h),
    and the planner its note and its tiles' fields."""
    f = family_registry.family(name)
    tiles = dict(family_registry.attention_candidate_tiles())[name]
    for piece in (f.path / "cuda" / f"{name}_cuda.cpp", f.path / "metal" / f"{name}_metal.cpp"):
        assert piece.is_file(), f"{name}: no {piece.relative_to(REPO)}"
        for function in (f"prepare_{name}", f"run_{name}"):
            assert re.search(rf"\b{function}\(", piece.read_text()), f"{piece.name}: no {function}"
    planning = (f.path / f"{name}_planning.cpp").read_text()
    assert re.search(rf"\bstd::string note_{name}\(", planning), name
    assert re.search(rf"\bTileFields tile_fields\(const fa::{tiles}&", planning), name


def test_selftest_cases_are_one_module_a_folder():
    """CMakeLists.txt installs a folder's <folder>_selftest.py as
    mlx_fused_attn.selftest_cases.<folder>, whose cases() the selftest
    calls."""
    found = sorted(FAMILIES_DIR.glob("*/*_selftest.py"))
    assert found, "no family has self-test cases"
    for path in found:
        assert path.name == f"{path.parent.name}_selftest.py", path
        assert re.search(r"^def cases\(add, dtype, quick\):", path.read_text(), re.M), path


def test_candidate_tiles_header_is_current():
    """plan/candidate_tiles.h includes the header of each candidate's tiles
    type (tools/gen_instances.py writes it; --check runs in the compile tier)."""
    import gen_instances

    with open(gen_instances.CANDIDATE_TILES) as fh:
        assert fh.read() == gen_instances.candidate_tiles_header()


@pytest.mark.parametrize("path", DISPATCHING)
def test_backends_dispatch_through_the_registry(path):
    text = (REPO / path).read_text()
    named = [f.enumerator for f in families() if f"KernelFamily::{f.enumerator}" in text]
    assert named == [], path


def test_the_emulator_and_the_metal_build_see_every_family():
    assert set(jit_text.metal_sources()) == {f.name for f in families()}


def spelled_families(text):
    """The family names, folders and entry points `text` spells."""
    found = set()
    for f in families():
        for word in (f"families/{f.folder}", f"{f.name}.metal"):
            if word in text:
                found.add(word)
        for cuh in family_registry.cuda_entry_points(f.folder):
            if cuh.name in text:
                found.add(cuh.name)
    return found


@pytest.mark.parametrize("path", DISCOVERING)
def test_build_and_tools_name_no_family(path):
    """The build, the tools and the backends' family-generic code find the
    families by folder or registry, so a new family edits none of them."""
    assert spelled_families((REPO / path).read_text()) == set(), path


def test_the_check_sees_a_spelled_family():
    assert spelled_families('set(S ${ROOT}/mlx_fused_attn/families/neighborhood/neighborhood.metal)') == {
        "families/neighborhood",
        "neighborhood.metal",
    }
