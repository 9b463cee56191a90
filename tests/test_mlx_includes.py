"""The host code includes only MLX headers whose functions libmlx exports.

MLX builds libmlx with hidden visibility: many functions of its backend
headers (mlx/backend/gpu/copy.h's copy_gpu, for one) compile against the
headers but are not exported, so an extension that calls them fails to load
("undefined symbol") on that backend. The CUDA and Metal host code is only
compiled here, never linked against its libmlx (the Metal one not even on
the H200), so this list is the guard: a new MLX header joins it only after
the symbols the code uses from it were checked (nm -D on libmlx) as
exported."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parent.parent
ALLOWED = {
    "mlx/allocator.h",
    "mlx/array.h",
    "mlx/backend/cpu/encoder.h",
    "mlx/backend/cuda/allocator.h",
    "mlx/backend/cuda/device.h",
    "mlx/backend/cuda/utils.h",
    "mlx/backend/metal/device.h",
    "mlx/compile.h",
    "mlx/device.h",
    "mlx/dtype.h",
    "mlx/fast.h",
    "mlx/ops.h",
    "mlx/primitives.h",
    "mlx/stream.h",
    "mlx/transforms.h",
    "mlx/types/half_types.h",
    "mlx/utils.h",
}
INCLUDE = re.compile(r'#include\s+[<"](mlx/[^>"]+)[>"]')


def mlx_includes(text):
    return set(INCLUDE.findall(text))


def test_host_code_includes_only_exported_mlx_headers():
    found = {}
    for path in sorted((REPO / "mlx_fused_attn").rglob("*")):
        if path.suffix in (".h", ".cpp", ".cuh", ".cu"):
            for header in mlx_includes(path.read_text()) - ALLOWED:
                found.setdefault(header, []).append(str(path.relative_to(REPO)))
    assert not found, f"MLX headers outside the checked list: {found}"


def test_the_guard_sees_an_unexported_header():
    assert mlx_includes('#include "mlx/backend/gpu/copy.h"\n') - ALLOWED == {"mlx/backend/gpu/copy.h"}
