"""attn_params.AttnParams has the size and field offsets of fa::AttnParams
as g++ compiles mlx_fused_attn/params.h, both for the host and for kernels
in the emulator (where __METAL_VERSION__ is defined)."""

import ctypes
import subprocess

import pytest

from . import emu
from .attn_params import AttnParams


def layout_from_gxx(tmp_path, defines):
    fields = [f for f, _ in AttnParams._fields_]
    src = tmp_path / "layout.cpp"
    src.write_text(
        '#include "mlx_fused_attn/params.h"\n#include <cstddef>\n#include <cstdio>\n'
        "int main() {\n"
        '  std::printf("size %zu\\n", sizeof(fa::AttnParams));\n'
        + "".join(
            f'  std::printf("{f} %zu\\n", offsetof(fa::AttnParams, {f}));\n' for f in fields
        )
        + "}\n"
    )
    exe = tmp_path / "layout"
    build = subprocess.run(
        [emu.CXX, "-std=c++17", *defines, "-I", emu.SHIM_DIR, "-I", emu.REPO_ROOT,
         str(src), "-o", str(exe)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, f"AttnParams fields no longer match params.h:\n{build.stderr}"
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


@pytest.mark.parametrize("defines", [[], emu.METAL_DEFINES], ids=["host", "emulated_metal"])
def test_layout_matches_params_h(tmp_path, defines):
    cxx = layout_from_gxx(tmp_path, defines)
    assert cxx.pop("size") == ctypes.sizeof(AttnParams)
    assert cxx == {f: getattr(AttnParams, f).offset for f, _ in AttnParams._fields_}
