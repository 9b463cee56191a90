"""The kernel families as the Python tools and tests see them: the lines of
mlx_fused_attn/families/registry.h (the one list by hand) and the files of
each family's folder.

    from family_registry import families, metal_sources
    families()        # [Family(enumerator, name, folder, cpu_kernel, cuda_source)]
    attention_candidate_tiles()  # [(name, tiles)] of the attention op's families
    metal_sources()   # every family's .metal entry point, repository paths

A new family is a folder and a registry line: whatever iterates over the
families here (the emulator, the conformance pass, the mutation tool,
tools/gen_instances.py) picks it up without an edit.
"""

import pathlib
import re
from typing import NamedTuple

REPO = pathlib.Path(__file__).resolve().parent.parent
FAMILIES_DIR = REPO / "mlx_fused_attn" / "families"
REGISTRY = FAMILIES_DIR / "registry.h"

_LINE = re.compile(
    r"X\(\s*(\w+),\s*(\w+),\s*(\w+),\s*(true|false),\s*(true|false)\s*\)")


class Family(NamedTuple):
    enumerator: str  # KernelFamily::<enumerator>
    name: str  # the .metal stem, the JIT and metallib key
    folder: str  # mlx_fused_attn/families/<folder>/
    cpu_kernel: bool  # has a CPU kernel (backend/cpu/)
    cuda_source: bool  # the folder's *_kernel.cuh are its own NVRTC text

    @property
    def path(self):
        return FAMILIES_DIR / self.folder

    @property
    def metal_source(self):
        return self.path / f"{self.name}.metal"


def families(registry=REGISTRY):
    """The registry's lines, in its order."""
    text = pathlib.Path(registry).read_text()
    body = text[text.index("#define FA_KERNEL_FAMILIES(X)"):]
    return [
        Family(e, name, folder, cpu == "true", cuda == "true")
        for e, name, folder, cpu, cuda in _LINE.findall(body.replace("\\\n", " "))
    ]


def attention_candidates(registry=REGISTRY):
    """The names of FA_ATTENTION_CANDIDATES, in the planner's order."""
    return [name for name, _ in attention_candidate_tiles(registry)]


def attention_candidate_tiles(registry=REGISTRY):
    """[(name, tiles)] of FA_ATTENTION_CANDIDATES, in the planner's order:
    each candidate's tiles type in namespace fa."""
    text = pathlib.Path(registry).read_text()
    body = text[text.index("#define FA_ATTENTION_CANDIDATES(X)"):].replace("\\\n", " ")
    return re.findall(r"X\(\s*\w+,\s*(\w+),\s*(\w+)\s*\)", body.split("\n")[0])


def family(name):
    """The family called `name`."""
    for f in families():
        if f.name == name:
            return f
    raise KeyError(f"no kernel family {name!r} in {REGISTRY.relative_to(REPO)}")


def metal_sources():
    """Every family's .metal entry point, as absolute paths, in registry order."""
    return [f.metal_source for f in families()]


def folders():
    """The folders of mlx_fused_attn/families/ (each must be a family's)."""
    return sorted(p.name for p in FAMILIES_DIR.iterdir() if p.is_dir() and p.name != "__pycache__")


def cuda_entry_points(folder):
    """The CUDA entry point headers of a family folder (its NVRTC text and
    what its AOT tables include), sorted."""
    return sorted((FAMILIES_DIR / folder).glob("*_kernel.cuh"))
