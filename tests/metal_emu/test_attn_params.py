"""attn_params.AttnParams, attn_bwd_params.AttnBwdParams and
quant_kv_params.QuantKvParams have the size and field offsets of
fa::AttnParams, fa::AttnBwdParams and fa::QuantKvParams as g++ compiles
mlx_fused_attn/params.h, backward_params.h and quantized_kv_params.h, both for the host and for
kernels in the emulator (where __METAL_VERSION__ is defined)."""

import ctypes
import subprocess

import pytest

from . import emu
from .attn_bwd_params import AttnBwdParams
from .attn_params import AttnParams
from .quant_kv_params import QuantKvParams

STRUCTS = [
    (AttnParams, "fa::AttnParams", "mlx_fused_attn/params.h"),
    (AttnBwdParams, "fa::AttnBwdParams", "mlx_fused_attn/families/attention_backward/backward_params.h"),
    (QuantKvParams, "fa::QuantKvParams", "mlx_fused_attn/quantized_kv_params.h"),
]


def layout_from_gxx(tmp_path, defines, struct, cname, header):
    fields = [f for f, _ in struct._fields_]
    src = tmp_path / "layout.cpp"
    src.write_text(
        f'#include "{header}"\n#include <cstddef>\n#include <cstdio>\n'
        "int main() {\n"
        f'  std::printf("size %zu\\n", sizeof({cname}));\n'
        + "".join(
            f'  std::printf("{f} %zu\\n", offsetof({cname}, {f}));\n' for f in fields
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
    assert build.returncode == 0, f"{struct.__name__} fields no longer match {header}:\n{build.stderr}"
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


@pytest.mark.parametrize("struct, cname, header", STRUCTS, ids=["AttnParams", "AttnBwdParams", "QuantKvParams"])
@pytest.mark.parametrize("defines", [[], emu.METAL_DEFINES], ids=["host", "emulated_metal"])
def test_layout_matches_params_h(tmp_path, defines, struct, cname, header):
    cxx = layout_from_gxx(tmp_path, defines, struct, cname, header)
    assert cxx.pop("size") == ctypes.sizeof(struct)
    assert cxx == {f: getattr(struct, f).offset for f, _ in struct._fields_}
