"""One JIT library a kernel family: each family's text stands alone, the
generated C++ hands each out by name, and a compile error in one family's
text (the test hook MLX_FUSED_ATTN_BREAK_FAMILY appends one) leaves the
other families building and computing."""

import os
import re
import subprocess

import pytest

from . import emu, jit_text
from .test_short_attention_kernel import run_case as run_short_case
from .test_short_attention_kernel import KERNEL, seq_for

FAMILIES = (
    "attention",
    "attention_backward",
    "attention_backward_row_dot",
    "neighborhood",
    "short_attention",
    "strided_copy",
)


def injected_error():
    """The line the C++ test hook appends (mlx_fused_attn/backend/kernel_family.cpp)."""
    path = os.path.join(emu.REPO_ROOT, "mlx_fused_attn", "backend", "kernel_family.cpp")
    with open(path) as fh:
        literal = re.search(r'injected_compile_error\(\) \{\s*return "(.*?)";', fh.read(), re.S).group(1)
    return literal.encode().decode("unicode_escape")


def test_every_family_has_a_text_of_its_own():
    assert set(jit_text.metal_sources()) == set(FAMILIES)
    for family in FAMILIES:
        text = jit_text.family_text(family)
        assert not re.search(r'^\s*#\s*include\s*"', text, re.MULTILINE), family


def test_generated_cpp_hands_out_each_family(tmp_path):
    """jit_source(family) returns that family's text, nullptr otherwise: the
    C++ the build compiles, checked by compiling it."""
    cpp = tmp_path / "jit.cpp"
    header = tmp_path / "mlx_fused_attn" / "backend" / "metal" / "jit_source.h"
    subprocess.run(
        ["python3", os.path.join(emu.REPO_ROOT, "cmake", "flatten_source.py"), "-I", emu.REPO_ROOT,
         "--cpp", str(cpp)] + list(jit_text.metal_sources().values()),
        check=True,
    )
    header.parent.mkdir(parents=True)
    header.write_text(open(os.path.join(emu.REPO_ROOT, "mlx_fused_attn", "backend", "metal", "jit_source.h")).read())
    main = tmp_path / "main.cpp"
    main.write_text(
        '#include <cstdio>\n#include "mlx_fused_attn/backend/metal/jit_source.h"\n'
        "int main(int argc, char** argv) {\n"
        "  const char* t = mlx_fused_attn::metal::jit_source(argv[1]);\n"
        '  if (t) std::fputs(t, stdout); else std::fputs("<null>", stdout);\n'
        "}\n"
    )
    exe = tmp_path / "jit"
    subprocess.run([emu.CXX, "-std=c++17", "-I", str(tmp_path), str(main), str(cpp), "-o", str(exe)], check=True)
    for family in FAMILIES:
        got = subprocess.run([str(exe), family], capture_output=True, text=True, check=True).stdout
        assert got == "\n" + jit_text.family_text(family), family
    assert subprocess.run([str(exe), "nope"], capture_output=True, text=True).stdout == "<null>"


def test_a_broken_family_leaves_the_others_running():
    broken = jit_text.write_family("attention", suffix=injected_error(), tag="_broken")
    with pytest.raises(emu.CompileError, match="injected by MLX_FUSED_ATTN_BREAK_FAMILY"):
        emu.load(broken)
    path = jit_text.write_family("short_attention")
    want = ("float16", "64", str(seq_for(40, 33)))
    (name,) = [n for n in emu.instance_names(path) if (m := KERNEL.match(n)) and m.groups()[:3] == want]
    short = emu.load(path, only=name)
    run_short_case(short, dtype="float16", D=64, H_q=4, H_kv=2, L_q=40, L_k=33, causal=True, seed=5)
