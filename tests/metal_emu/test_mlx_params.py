"""mlx_params' ctypes structures have the size and field offsets of MLX's
parameter structs as g++ compiles MLX's headers (steel/attn/params.h,
steel/gemm/params.h of the pinned MLX), for the host and for kernels in
the emulator (where __METAL_VERSION__ is defined)."""

import ctypes
import subprocess

import pytest

from . import emu, mlx_emu
from .mlx_params import STRUCTS


@pytest.mark.parametrize("struct, cname, header", STRUCTS, ids=[s.__name__ for s, _, _ in STRUCTS])
@pytest.mark.parametrize("defines", [[], emu.METAL_DEFINES], ids=["host", "emulated_metal"])
def test_layout_matches_mlx_header(tmp_path, defines, struct, cname, header):
    include, reason = mlx_emu.mlx_include()
    if include is None:
        pytest.skip(reason)
    fields = [f for f, _ in struct._fields_]
    src = tmp_path / "layout.cpp"
    src.write_text(
        f'#include <cstdint>\n#include "{header}"\n#include <cstddef>\n#include <cstdio>\n'
        "int main() {\n"
        f'  std::printf("size %zu\\n", sizeof({cname}));\n'
        + "".join(f'  std::printf("{f} %zu\\n", offsetof({cname}, {f}));\n' for f in fields)
        + "}\n"
    )
    exe = tmp_path / "layout"
    build = subprocess.run(
        [emu.CXX, "-std=c++17", *defines, "-I", include, str(src), "-o", str(exe)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, f"{struct.__name__} fields no longer match {header}:\n{build.stderr}"
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    layout = {k: int(v) for k, v in (line.split() for line in out.splitlines())}
    assert layout.pop("size") == ctypes.sizeof(struct)
    assert layout == {f: getattr(struct, f).offset for f, _ in struct._fields_}
