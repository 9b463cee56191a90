"""The JIT's texts: each family's text stands alone; the JIT compiles one
kernel at a time, the family's text without its instantiations plus the one
line that defines the kernel, which the generated C++ hands out by family
and kernel name; and a compile error in one family's text (the test hook
MLX_FUSED_ATTN_BREAK_FAMILY appends one) leaves the other families
building and computing."""

import os
import re
import subprocess
import sys

import pytest

from . import emu, jit_text
from .test_short_attention_kernel import run_case as run_short_case
from .test_short_attention_kernel import KERNEL, seq_for

sys.path.insert(0, os.path.join(emu.REPO_ROOT, "tools"))
from family_registry import families  # noqa: E402

FAMILIES = tuple(f.name for f in families())


def injected_error():
    """The line the C++ test hook appends (mlx_fused_attn/backend/kernel_availability.cpp)."""
    path = os.path.join(emu.REPO_ROOT, "mlx_fused_attn", "backend", "kernel_availability.cpp")
    with open(path) as fh:
        literal = re.search(r'injected_compile_error\(\) \{\s*return "(.*?)";', fh.read(), re.S).group(1)
    return literal.encode().decode("unicode_escape")


def test_every_family_has_a_text_of_its_own():
    assert set(jit_text.metal_sources()) == set(FAMILIES)
    for family in FAMILIES:
        text = jit_text.family_text(family)
        assert not re.search(r'^\s*#\s*include\s*"', text, re.MULTILINE), family


def test_every_kernel_has_its_one_kernel_text():
    """The instantiations flatten_source.py splits off name exactly the
    kernels the preprocessor sees in the family's text, and each family's
    first instantiation alone makes a text that defines its kernels and no
    other."""
    for family in FAMILIES:
        lines = jit_text.instances(family)
        named = [n for names, _ in lines for n in names]
        assert len(named) == len(set(named)), family
        assert set(named) == emu.instance_names(jit_text.write_family(family)), family
        names, line = lines[0]
        path = jit_text.write_kernel(family, names[-1])
        assert open(path).read().endswith("\n" + line + "\n")
        assert emu.instance_names(path) == set(names), family


SYNTHETIC = """template <typename T, int D> [[kernel]] void k(device T* x) {}
#define INST(tname, T, D)                                   \\
  template [[host_name("k_" #tname "_d" #D)]] [[kernel]]     \\
  decltype(k<T, D>) k<T, D>;
#define PAIR(tname, T)                                      \\
  template [[host_name("a_" #tname)]] [[kernel]] decltype(k<T, 1>) k<T, 1>; \\
  template [[host_name("b_" #tname)]] [[kernel]] decltype(k<T, 2>) k<T, 2>;
INST(float16, half, 64)
INST(float32, float, 128)
PAIR(float16, half)
"""


def test_instances_are_split_off_by_their_macros():
    """flatten_source.py on a made-up family: every line invoking a macro
    that names kernels is an instantiation, its names are the macro's host
    names with the arguments put in (two for a line defining two kernels),
    and the rest of the text is kept as it was."""
    body, lines = jit_text.flatten_source.split_instances(SYNTHETIC)
    assert lines == [
        (["k_float16_d64"], "INST(float16, half, 64)"),
        (["k_float32_d128"], "INST(float32, float, 128)"),
        (["a_float16", "b_float16"], "PAIR(float16, half)"),
    ]
    assert body == SYNTHETIC.replace("INST(float16, half, 64)\n", "").replace(
        "INST(float32, float, 128)\n", "").replace("PAIR(float16, half)\n", "")
    assert jit_text.flatten_source.instance_text(SYNTHETIC, "b_float16") == body + "PAIR(float16, half)\n"
    with pytest.raises(jit_text.flatten_source.FlattenError, match="no instantiation defines"):
        jit_text.flatten_source.instance_text(SYNTHETIC, "k_float16_d32")


@pytest.mark.parametrize(
    "text, message",
    [
        (SYNTHETIC + "INST(float16, half)\n", "takes 3 arguments"),
        (SYNTHETIC + 'template [[host_name("c")]] [[kernel]] decltype(k<half, 3>) k<half, 3>;\n',
         "outside an instantiating #define"),
        ('#define BAD(a) template [[host_name("x" #b)]] [[kernel]] void f();\nBAD(1)\n',
         "not a macro parameter"),
    ],
)
def test_instances_that_cannot_be_split_off_fail(text, message):
    """An instantiation the JIT could not compile alone fails the build."""
    with pytest.raises(jit_text.flatten_source.FlattenError, match=message):
        jit_text.flatten_source.split_instances(text)


def test_generated_cpp_hands_out_each_kernel(tmp_path):
    """jit_source(family) plus jit_instance(family, kernel)'s line is the
    one-kernel text, for every kernel; the kernels of one line share their
    library's name; unknown names give nullptr. The C++ the build compiles,
    checked by compiling it."""
    cpp = tmp_path / "jit.cpp"
    header = tmp_path / "mlx_fused_attn" / "backend" / "metal" / "jit_source.h"
    subprocess.run(
        ["python3", os.path.join(emu.REPO_ROOT, "cmake", "flatten_source.py"), "-I", emu.REPO_ROOT,
         "--cpp", str(cpp), "--instances"] + list(jit_text.metal_sources().values()),
        check=True,
    )
    header.parent.mkdir(parents=True)
    header.write_text(open(os.path.join(emu.REPO_ROOT, "mlx_fused_attn", "backend", "metal", "jit_source.h")).read())
    main = tmp_path / "main.cpp"
    main.write_text(
        '#include <cstdio>\n#include <string>\n#include "mlx_fused_attn/backend/metal/jit_source.h"\n'
        "namespace m = mlx_fused_attn::metal;\n"
        "int main(int argc, char** argv) {\n"
        "  const char* t = m::jit_source(argv[1]);\n"
        '  if (argc == 2) { std::fputs(t ? t : "<null>", stdout); return 0; }\n'
        "  const m::JitInstance* i = m::jit_instance(argv[1], argv[2]);\n"
        '  if (!t || !i) { std::fputs("<null>", stdout); return 0; }\n'
        '  std::printf("%s\\n%s%s\\n", i->library, t, i->line);\n'
        "}\n"
    )
    exe = tmp_path / "jit"
    subprocess.run([emu.CXX, "-std=c++17", "-I", str(tmp_path), str(main), str(cpp), "-o", str(exe)], check=True)

    def run(*args):
        return subprocess.run([str(exe), *args], capture_output=True, text=True, check=True).stdout

    for family in FAMILIES:
        for names, _ in jit_text.instances(family):
            for kernel in names:
                library, text = run(family, kernel).split("\n", 1)
                assert library == names[0], (family, kernel)
                assert text == "\n" + jit_text.kernel_text(family, kernel), (family, kernel)
        assert run(family, "fa_no_such_kernel") == "<null>"
    assert run("nope") == "<null>"
    assert run("nope", "fa_strided_copy_float32") == "<null>"


def test_a_broken_family_leaves_the_others_running():
    broken = jit_text.write_family("attention", suffix=injected_error(), tag="_broken")
    with pytest.raises(emu.CompileError, match="injected by MLX_FUSED_ATTN_BREAK_FAMILY"):
        emu.load(broken)
    want = ("float16", "64", str(seq_for(40, 33)))
    (name,) = [
        n for names, _ in jit_text.instances("short_attention") for n in names
        if (m := KERNEL.match(n)) and m.groups()[:3] == want
    ]
    short = emu.load(jit_text.write_kernel("short_attention", name))
    run_short_case(short, dtype="float16", D=64, H_q=4, H_kv=2, L_q=40, L_k=33, causal=True, seed=5)
