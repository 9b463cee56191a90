"""MLX's own Metal kernels in the emulator: the units of mlx_kernels/
(MLX's kernel headers, of the MLX version pyproject.toml pins, instantiated
as MLX's instantiation files do) built against the shim, unmodified.

    prog = mlx_emu.load("steel_attention", only="steel_attention_float16_...")

The headers come from the pinned MLX's macOS wheel, downloaded once by
tests/metal_host/check_metal_host.py (`mlx_metal_prefix`); a test skips when
PyPI is unreachable and the wheel is not cached. The build differs from the
package's in two ways, both in MLX's favour: the source is compiled at
program scope, as Metal compiles it (its overloads of Metal's functions sit
beside `using namespace metal;`, which the emulator's unnamed namespace
would split), and emu_include/ comes first on the include path, where
complex.h stands in for MLX's (its own header says why).
"""

import functools
import importlib.util
import os

from . import emu

UNIT_DIR = os.path.join(emu.EMU_DIR, "mlx_kernels")
EMU_INCLUDE = os.path.join(UNIT_DIR, "emu_include")
CHECK_METAL_HOST = os.path.join(emu.REPO_ROOT, "tests", "metal_host", "check_metal_host.py")


@functools.lru_cache(maxsize=None)
def mlx_include():
    """(the include directory of the pinned MLX's kernel headers, None), or
    (None, why they cannot be had here)."""
    spec = importlib.util.spec_from_file_location("check_metal_host", CHECK_METAL_HOST)
    host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)
    try:
        return str(host.mlx_metal_prefix(host.pinned_mlx_version()) / "include"), None
    except host.Unavailable as e:
        return None, str(e)


def load(unit, only=None, defines=()):
    """emu.load of mlx_kernels/<unit>.metal (one instantiation: `only`)
    with MLX's headers; skips the calling test where they cannot be had."""
    include, reason = mlx_include()
    if include is None:
        import pytest

        pytest.skip(reason)
    return emu.load(
        os.path.join(UNIT_DIR, unit + ".metal"),
        only=only,
        include_dirs=(EMU_INCLUDE, include),
        defines=defines,
        unnamed_namespace=False,
    )
